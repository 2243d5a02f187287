"""A store location or input path as text: checked before any filesystem library sees it."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from carbonstore.errors import UserError
from carbonstore.limits import MAX_LOCATION_LENGTH

__all__ = ["LOCATION_SCHEMES", "check_location"]


#: URI schemes a store location or input path may use (a local path needs none).
LOCATION_SCHEMES = ("file", "s3", "hdfs", "viewfs")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_location(location: object, what: str = "location") -> str:
    """``location`` when it is a usable store location or input path: text of at most
    :data:`MAX_LOCATION_LENGTH` characters without control characters; a URI has a scheme
    of :data:`LOCATION_SCHEMES`, no ``..`` or ``.`` path segment (object keys and URIs
    resolve none; a local path may have them) and no fragment.

    Raises:
        UserError: one line naming the location and what to change.
    """
    if not isinstance(location, str) or not location.strip():
        raise UserError(f"{what} is empty; give a local path or a URI such as s3://bucket/prefix")
    shown = repr(location if len(location) <= 120 else location[:117] + "...")
    if len(location) > MAX_LOCATION_LENGTH:
        raise UserError(f"{what} {shown} is {len(location):,} characters long: at most "
                        f"{MAX_LOCATION_LENGTH:,} are supported")
    if (bad := _CONTROL.search(location)) is not None:
        raise UserError(f"{what} {shown} holds a control character "
                        f"(U+{ord(bad.group()):04X}); paths and URIs hold none")
    if "://" not in location:
        return location
    scheme = location.split("://", 1)[0].lower()
    if scheme not in LOCATION_SCHEMES:
        raise UserError(f"{what} {shown} is not usable: the scheme {scheme + '://'!r} is not "
                        f"supported; use a local path or one of "
                        f"{', '.join(s + '://' for s in LOCATION_SCHEMES)}")
    parts = urlsplit(location)
    if parts.fragment or location.endswith("#"):
        raise UserError(f"{what} {shown} has a fragment ('#...'); remove it")
    if any(seg in ("..", ".") for seg in parts.path.split("/")):
        raise UserError(f"{what} {shown} has a '..' or '.' path segment; a URI names its "
                        "folder directly (write the path without '..')")
    return location
