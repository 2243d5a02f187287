"""S3-compatible object stores: the filesystem, the conditional put, the probe, request counts.

Contract (docs/object-stores.md):

- Reads, writes and listings go through ``pyarrow.fs.S3FileSystem``, wrapped so every call
  is counted per operation (``request_counts()``; each call is logged at debug level).
- The commit primitive is a conditional put, ``PUT`` with ``If-None-Match: *``, sent with
  obstore (``PutMode "create"``; pyarrow.fs has none): 200 means this call created the
  object, 412 means it existed. Nothing else uses obstore.
- A store is probed once per process before its first commit (``StoreFS.check_commits``,
  called when a ``Store`` opens): two conditional puts of one new key; a server that
  accepts the second ignores the header, and the store is refused (``UnsupportedStoreError``,
  a ``UserError``) before anything is written that could be overwritten later.
- Connection settings come from the location's query (``s3://bucket/prefix?endpoint=...&
  region=...&path_style=true``), then the conf keys ``carbon.s3.*``, then the standard AWS
  environment variables (and ``AWS_PROFILE``, read through botocore when installed).
  ``shipped_location`` folds the conf's non-secret settings into the query, so a task on an
  executor that only has the location builds the same filesystem.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from carbonstore.errors import UnsupportedStoreError, UserError
from carbonstore.store.conf import load_conf
from carbonstore.store.location import CONF_KEYS, TRUE_VALUES, check_location, shipped_location

if TYPE_CHECKING:
    from carbonstore.store.conf import CarbonConf

__all__ = [
    "S3Options",
    "S3ConditionalPut",
    "counting_fs",
    "object_uri",
    "request_counts",
    "reset_request_counts",
    "s3_options",
    "shipped_location",
]

log = logging.getLogger(__name__)

SECRET_KEYS = ("carbon.s3.access.key", "carbon.s3.secret.key", "carbon.s3.session.token")

# ---- request counts ---------------------------------------------------------------------

_COUNTS: Counter[str] = Counter()
_COUNTS_LOCK = threading.Lock()


def _count(op: str, path: str) -> None:
    with _COUNTS_LOCK:
        _COUNTS[op] += 1
        n = _COUNTS[op]
    if log.isEnabledFor(logging.DEBUG):
        log.debug("object store %s %s (%d so far)", op, path, n)


def request_counts() -> dict[str, int]:
    """Object-store requests of this process by operation (``HEAD``, ``LIST``, ``GET``, ...).

    ``GET`` counts opened objects (a reader may fetch one in several ranged GETs),
    ``PUT`` written objects, ``PUT-IF-ABSENT`` conditional puts (the probe's included).
    """
    with _COUNTS_LOCK:
        return dict(_COUNTS)


def reset_request_counts() -> None:
    with _COUNTS_LOCK:
        _COUNTS.clear()


@atexit.register
def _log_counts() -> None:
    if _COUNTS:
        log.debug("object store requests: %s", dict(sorted(_COUNTS.items())))


class _CountingHandler(pafs.FileSystemHandler):
    """Delegates to a pyarrow filesystem and counts each call as the request it makes."""

    def __init__(self, inner: pafs.FileSystem) -> None:
        self.inner = inner

    def __reduce__(self) -> tuple[Any, ...]:
        return (_CountingHandler, (self.inner,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CountingHandler) and self.inner.equals(other.inner)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return id(self.inner)

    def get_type_name(self) -> str:
        return f"counting+{self.inner.type_name}"

    def normalize_path(self, path: str) -> str:
        return self.inner.normalize_path(path)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        for p in paths:
            _count("HEAD", p)
        return self.inner.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        _count("LIST", selector.base_dir)
        return self.inner.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        _count("MKDIR", path)
        self.inner.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        _count("DELETE-DIR", path)
        self.inner.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        _count("DELETE-DIR", path)
        self.inner.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise pa.ArrowNotImplementedError("deleting a bucket's whole content is not allowed")

    def delete_file(self, path: str) -> None:
        _count("DELETE", path)
        self.inner.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        _count("COPY", src)
        self.inner.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        _count("COPY", src)
        self.inner.copy_file(src, dest)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        _count("GET", path)
        return self.inner.open_input_stream(path)

    def open_input_file(self, path: str) -> pa.NativeFile:
        _count("GET", path)
        return self.inner.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        _count("PUT", path)
        return self.inner.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        raise pa.ArrowNotImplementedError("object stores cannot append")


def counting_fs(inner: pafs.FileSystem) -> pafs.FileSystem:
    """``inner`` with every call counted in ``request_counts()``."""
    return pafs.PyFileSystem(_CountingHandler(inner))


# ---- connection settings ----------------------------------------------------------------



@dataclass(frozen=True, slots=True)
class S3Options:
    """How to reach one bucket: endpoint (None: AWS), region, addressing, credentials."""

    bucket: str
    prefix: str
    endpoint: str | None = None
    region: str | None = None
    path_style: bool = False
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @property
    def base(self) -> str:
        return f"{self.bucket}/{self.prefix}".rstrip("/")

    def pyarrow_fs(self) -> pafs.S3FileSystem:
        kwargs: dict[str, Any] = {}
        if self.endpoint:
            parts = urlsplit(self.endpoint if "://" in self.endpoint else f"https://{self.endpoint}")
            kwargs["endpoint_override"] = parts.netloc + parts.path.rstrip("/")
            kwargs["scheme"] = parts.scheme or "https"
        if self.access_key and self.secret_key:
            kwargs.update(access_key=self.access_key, secret_key=self.secret_key,
                          session_token=self.session_token)
        elif self.path_style:
            # pyarrow addresses buckets virtual-hosted on AWS and path-style on any other
            # endpoint: naming AWS's own endpoint forces path-style there too.
            kwargs["endpoint_override"] = f"s3.{self.region or 'us-east-1'}.amazonaws.com"
        return pafs.S3FileSystem(region=self.region, **kwargs)

    def object_store(self) -> Any:
        """The obstore ``S3Store`` of the bucket (the conditional put's client)."""
        from obstore.store import S3Store  # only object stores pay for the import

        config: dict[str, Any] = {"region": self.region} if self.region else {}
        client: dict[str, Any] = {}
        if self.endpoint:
            config["endpoint"] = self.endpoint
            client["allow_http"] = self.endpoint.startswith("http://")
        config["virtual_hosted_style_request"] = not (self.path_style or self.endpoint)
        provider = None
        if self.access_key and self.secret_key:
            config.update(access_key_id=self.access_key, secret_access_key=self.secret_key)
            if self.session_token:
                config["session_token"] = self.session_token
        elif os.environ.get("AWS_PROFILE") and not os.environ.get("AWS_ACCESS_KEY_ID"):
            # Profiles (shared config files, SSO) are read by botocore, as pyarrow's SDK does.
            try:
                from obstore.auth.boto3 import Boto3CredentialProvider
            except ImportError as err:
                raise UserError(
                    "AWS_PROFILE needs boto3 for the commits' client: pip install boto3, or "
                    "give the credentials as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"
                ) from err
            provider = Boto3CredentialProvider()
        return S3Store(self.bucket, config=config, client_options=client,  # type: ignore[arg-type]
                       credential_provider=provider)


def _conf_value(conf: CarbonConf, key: str) -> str:
    return conf.get(key).strip()


def s3_options(location: str, conf: CarbonConf | None = None) -> S3Options:
    """Resolve ``s3://bucket/prefix[?endpoint=..&region=..&path_style=..]`` with the conf
    (``None``: ``load_conf()``) and the standard AWS environment variables.

    Raises:
        UserError: the location names no bucket or has an unknown query parameter.
    """
    if conf is None:
        conf = load_conf()
    parts = urlsplit(check_location(location))
    bucket, prefix = parts.netloc, parts.path.strip("/")
    if not bucket:
        raise UserError(f"location {location!r} names no bucket; write s3://bucket/prefix")
    if not _BUCKET.fullmatch(bucket):
        raise UserError(f"location {location!r}: {bucket!r} is not a bucket name (letters, "
                        "digits, '.', '-' and '_'; credentials go in the conf, not the URI)")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(query) - set(CONF_KEYS.values()))
    if unknown:
        raise UserError(
            f"location {location!r} has unknown parameter(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(CONF_KEYS.values())}"
        )
    got = {q: query.get(q) or _conf_value(conf, k) for k, q in CONF_KEYS.items()}
    origin = {q: f"the location {location!r}" if query.get(q)
              and query.get(q) != _conf_value(conf, k) else f"configuration key {k}"
              for k, q in CONF_KEYS.items()}  # shipped_location folds the conf into the query
    endpoint = got["endpoint"]
    for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if not endpoint and os.environ.get(var):
            endpoint, origin["endpoint"] = os.environ[var], f"environment variable {var}"
    if endpoint:
        check_endpoint(endpoint, origin["endpoint"])
    region = got["region"] or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region and not _REGION.fullmatch(region):
        raise UserError(f"region {region!r} (from {origin['region']}) is not a region name such "
                        "as us-east-1")
    if not region:
        region = "us-east-1" if endpoint else _bucket_region(bucket)
    access, secret, token = (_conf_value(conf, k) or None for k in SECRET_KEYS)
    return S3Options(
        bucket=bucket, prefix=prefix, endpoint=endpoint or None, region=region,
        path_style=got["path_style"].lower() in TRUE_VALUES,
        access_key=access, secret_key=secret, session_token=token,
    )


_BUCKET = re.compile(r"[A-Za-z0-9._-]{1,255}")
_REGION = re.compile(r"[A-Za-z0-9-]{1,64}")
_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")


def check_endpoint(endpoint: str, origin: str = "the conf") -> str:
    """``endpoint`` when it is ``http(s)://host[:port]`` (a trailing ``/`` allowed): the
    only shape both S3 clients (pyarrow's and obstore's) read the same way.

    Raises:
        UserError: one line naming the endpoint, where it came from and the shape.
    """
    bad = UserError(f"S3 endpoint {endpoint!r} (from {origin}) is not usable: write "
                    "http://host[:port] or https://host[:port], without a path, user or query")
    try:
        parts = urlsplit(endpoint)
        port = parts.port  # ValueError: not a number, or out of 0-65535
    except ValueError:
        raise bad from None
    if (parts.scheme.lower() not in ("http", "https") or parts.path not in ("", "/")
            or parts.query or parts.fragment or "@" in parts.netloc
            or not _HOST.fullmatch(parts.netloc.rsplit(":", 1)[0] if port is not None
                                   else parts.netloc)
            or port == 0):
        raise bad
    return endpoint


def _bucket_region(bucket: str) -> str:
    try:
        return pafs.resolve_s3_region(bucket)
    except (OSError, pa.ArrowException):
        return "us-east-1"


# ---- the conditional put ----------------------------------------------------------------


class S3ConditionalPut:
    """``PUT`` with ``If-None-Match: *`` through obstore, probed once before the first use."""

    def __init__(self, options: S3Options) -> None:
        self.options = options
        self._store: Any = None
        self._probed = False
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        return (S3ConditionalPut, (self.options,))

    @property
    def store(self) -> Any:
        if self._store is None:
            self._store = self.options.object_store()
        return self._store

    def _put(self, key: str, data: bytes) -> bool:
        import obstore
        from obstore.exceptions import AlreadyExistsError, BaseError, PreconditionError

        _count("PUT-IF-ABSENT", key)
        for attempt in range(10):
            try:
                obstore.put(self.store, key, data, mode="create")
                return True
            except (AlreadyExistsError, PreconditionError):  # 412: the object exists
                return False
            except BaseError as err:
                # 409 ConditionalRequestConflict: another conditional put of this key is in
                # flight; AWS asks to retry, and the retry gets 200 or 412.
                if "409" in str(err) and attempt < 9:
                    time.sleep(0.05 * (attempt + 1))
                    continue
                raise OSError(f"conditional put of s3://{self.options.bucket}/{key} failed: "
                              f"{' '.join(str(err).split())[:300]}") from err
        return False  # unreachable: the last attempt returns or raises

    def check(self) -> None:
        """Probe once: the second of two conditional puts of one new key must fail.

        Raises:
            UnsupportedStoreError: the server ignored ``If-None-Match: *``.
        """
        import obstore
        from obstore.exceptions import BaseError

        with self._lock:
            if self._probed:
                return
            key = "/".join(p for p in (self.options.prefix, f".carbonstore-probe-{uuid.uuid4().hex}") if p)
            first = self._put(key, b"1")
            second = self._put(key, b"2")
            try:
                _count("DELETE", key)
                obstore.delete(self.store, key)
            except BaseError:  # a leftover probe object is harmless
                log.debug("probe object %s not removed", key, exc_info=True)
            if not first or second:
                raise UnsupportedStoreError(
                    f"store s3://{self.options.base} refused: its server ignores conditional "
                    "writes (If-None-Match: *), so concurrent commits could overwrite each "
                    "other; use AWS S3, MinIO, Cloudflare R2 or another server that supports them"
                )
            self._probed = True

    def _key(self, path: str) -> str:
        bucket, _, key = path.partition("/")
        if bucket != self.options.bucket:
            raise ValueError(f"{path} is not in bucket {self.options.bucket}")
        return key

    def put_if_absent(self, path: str, data: bytes) -> bool:
        key = self._key(path)
        self.check()
        return self._put(key, data)

    def get(self, path: str) -> bytes:
        """A whole object in one GET (pyarrow sends a HEAD first: twice the requests)."""
        import obstore
        from obstore.exceptions import BaseError, NotFoundError

        _count("GET", path)
        try:
            return bytes(obstore.get(self.store, self._key(path)).bytes())
        except NotFoundError:
            raise FileNotFoundError(f"{path} does not exist") from None
        except BaseError as err:
            raise OSError(f"cannot read s3://{path}: {' '.join(str(err).split())[:300]}") from err

    def put(self, path: str, data: bytes) -> None:
        """A whole object in one PUT (pyarrow's output stream sends a multipart upload)."""
        import obstore
        from obstore.exceptions import BaseError

        _count("PUT", path)
        try:
            obstore.put(self.store, self._key(path), data)
        except BaseError as err:
            raise OSError(f"cannot write s3://{path}: {' '.join(str(err).split())[:300]}") from err


_CACHE: dict[S3Options, tuple[pafs.FileSystem, S3ConditionalPut]] = {}
_CACHE_LOCK = threading.Lock()


def s3_filesystem(options: S3Options) -> tuple[pafs.FileSystem, S3ConditionalPut]:
    """The counting pyarrow filesystem and the conditional put of ``options`` (one per process)."""
    with _CACHE_LOCK:
        hit = _CACHE.get(options)
        if hit is None:
            hit = _CACHE[options] = (counting_fs(options.pyarrow_fs()), S3ConditionalPut(options))
        return hit



# ---- load inputs in a bucket ------------------------------------------------------------


def object_uri(path: str, location: str) -> str:
    """``bucket/key`` as an ``s3://`` URI with the query (endpoint, ...) of ``location``."""
    query = urlsplit(location).query
    return f"s3://{path}" + (f"?{query}" if query else "")
