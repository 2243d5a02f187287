"""A real S3 API server on 127.0.0.1 for tests and benchmarks: moto's, with two additions.

Run as a script (one process, killed by its starter)::

    python s3server.py [--ignore-conditional]

It prints ``PORT <n>`` once it listens on a free port. ``GET /__requests`` answers the
requests served so far by kind (``GET``, ``HEAD``, ``LIST``, ``PUT``, ``DELETE``, ...) as
JSON, and ``DELETE /__requests`` resets them. ``GET /__puts`` answers how many times each key
was written by a PUT that succeeded (``{"bucket/key": n}``): a key written twice is an
object that was overwritten; ``GET /__conditional`` the same for the conditional PUTs
(``If-None-Match: *``) that succeeded.

moto checks ``If-None-Match: *`` and stores the object in two steps, which a threaded
server interleaves; S3 makes that check and the write one step. Write requests are
therefore served one at a time here (reads stay concurrent), so the server keeps the
promise S3 makes. ``--ignore-conditional`` drops the header instead: a server without
conditional writes, the bad server the store must refuse.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

_WRITES = frozenset({"PUT", "POST", "DELETE"})


class Middleware:
    def __init__(self, app: Callable[..., Iterable[bytes]], *, ignore_conditional: bool) -> None:
        self.app = app
        self.ignore_conditional = ignore_conditional
        self.counts: Counter[str] = Counter()
        self.puts: Counter[str] = Counter()
        self.conditional: Counter[str] = Counter()
        self.count_lock = threading.Lock()
        self.write_lock = threading.Lock()

    def _kind(self, environ: dict[str, Any]) -> str:
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "/").strip("/")
        if method == "GET" and "/" not in path:  # a bucket's listing (path-style)
            return "LIST"
        if method == "PUT" and environ.get("HTTP_IF_NONE_MATCH") == "*":
            return "PUT-IF-ABSENT"
        return method

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") in ("/__requests", "/__puts", "/__conditional"):
            with self.count_lock:
                counts = {"/__requests": self.counts, "/__puts": self.puts,
                          "/__conditional": self.conditional}[environ["PATH_INFO"]]
                body = json.dumps(dict(counts)).encode()
                if environ["REQUEST_METHOD"] == "DELETE":
                    self.counts.clear()
            start_response("200 OK", [("Content-Type", "application/json"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        kind = self._kind(environ)
        with self.count_lock:
            self.counts[kind] += 1
        if self.ignore_conditional:
            environ.pop("HTTP_IF_NONE_MATCH", None)
        if environ["REQUEST_METHOD"] not in _WRITES:
            return self.app(environ, start_response)
        key = environ.get("PATH_INFO", "/").strip("/")
        status: list[str] = []

        def record(code: str, headers: Any, *rest: Any) -> Any:
            status.append(code)
            return start_response(code, headers, *rest)

        with self.write_lock:
            # Read the whole answer under the lock: the write is done when it is sent.
            body = list(self.app(environ, record))
        query = environ.get("QUERY_STRING", "")
        # a plain PUT, or the completion of a multipart upload (POST ?uploadId=...)
        whole = (environ["REQUEST_METHOD"] == "PUT" and not query) or (
            environ["REQUEST_METHOD"] == "POST" and query.startswith("uploadId="))
        if whole and "/" in key and status and status[0].startswith("200"):
            with self.count_lock:
                self.puts[key] += 1
                if kind == "PUT-IF-ABSENT":
                    self.conditional[key] += 1
        return body


def main(argv: list[str]) -> int:
    app = Middleware(DomainDispatcherApplication(create_backend_app),
                     ignore_conditional="--ignore-conditional" in argv)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
