"""A store location or input path as text: checked before any filesystem library sees it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from carbonstore.errors import UserError
from carbonstore.limits import MAX_LOCATION_LENGTH

if TYPE_CHECKING:
    from carbonstore.store.conf import CarbonConf

__all__ = ["CONF_KEYS", "LOCATION_SCHEMES", "TRUE_VALUES", "check_location", "shipped_location"]

#: Conf keys of the S3 connection, and the location query parameter of each (non-secret).
CONF_KEYS = {
    "carbon.s3.endpoint": "endpoint",
    "carbon.s3.region": "region",
    "carbon.s3.path.style.access": "path_style",
}
#: What ``path_style`` (and its conf key) takes as true.
TRUE_VALUES = ("true", "1", "yes")


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
    from urllib.parse import urlsplit  # URIs only: a local store's commands never load it (5 ms)

    parts = urlsplit(location)
    if parts.fragment or location.endswith("#"):
        raise UserError(f"{what} {shown} has a fragment ('#...'); remove it")
    if any(seg in ("..", ".") for seg in parts.path.split("/")):
        raise UserError(f"{what} {shown} has a '..' or '.' path segment; a URI names its "
                        "folder directly (write the path without '..')")
    return location


def shipped_location(location: str, conf: CarbonConf | None) -> str:
    """``location`` with the conf's non-secret S3 settings in its query (others unchanged).

    Tasks resolve the store from this string alone, so they reach the same endpoint with
    the same region and addressing. Credentials are never put there: tasks take them
    from the conf file (``CARBON_CONF``) or the AWS environment / profile.
    """
    if not location.startswith("s3://") or conf is None:
        return location
    from urllib.parse import parse_qsl, urlencode, urlsplit  # (as in check_location)

    parts = urlsplit(check_location(location))  # before the query is rebuilt
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    for key, q in CONF_KEYS.items():
        value = conf.get(key).strip()
        if value and q not in query and not (q == "path_style" and value.lower() not in TRUE_VALUES):
            query[q] = value
    base = f"s3://{parts.netloc}{parts.path}"
    return f"{base}?{urlencode(query)}" if query else base
