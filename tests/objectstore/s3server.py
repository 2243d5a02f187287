"""A real S3 API server on 127.0.0.1 for tests and benchmarks: moto's, with two additions.

Run as a script (one process, killed by its starter)::

    python s3server.py [--ignore-conditional]

It prints ``PORT <n>`` once it listens on a free port. ``GET /__requests`` answers the
requests served so far by kind (``GET``, ``HEAD``, ``LIST``, ``PUT``, ``DELETE``, ...) as
JSON, and ``DELETE /__requests`` resets them. ``GET /__puts`` answers how many times each key
was written by a PUT that succeeded (``{"bucket/key": n}``): a key written twice is an
object that was overwritten; ``GET /__conditional_puts`` the same for put-if-absent PUTs.
``PUT /__hide_from_list?bucket/key`` makes listings leave that key out (a LIST lagging a
write, which object stores other than S3 allow); ``DELETE /__hide_from_list`` shows all.

moto checks ``If-None-Match: *`` and stores the object in two steps, which a threaded
server interleaves; S3 makes that check and the write one step. Write requests are
therefore served one at a time here (reads stay concurrent), so the server keeps the
promise S3 makes. ``--ignore-conditional`` drops the header instead: a server without
conditional writes, the bad server the store must refuse.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import urllib.parse
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
        self.conditional_puts: Counter[str] = Counter()  # the put-if-absent ones among puts
        self.count_lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.hidden: set[str] = set()  # keys listings leave out (a LIST that lags a write)

    def _kind(self, environ: dict[str, Any]) -> str:
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "/").strip("/")
        if method == "GET" and "/" not in path:  # a bucket's listing (path-style)
            return "LIST"
        if method == "PUT" and environ.get("HTTP_IF_NONE_MATCH") == "*":
            return "PUT-IF-ABSENT"
        return method

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") in ("/__requests", "/__puts", "/__conditional_puts"):
            with self.count_lock:
                counts = {"/__requests": self.counts, "/__puts": self.puts,
                          "/__conditional_puts": self.conditional_puts}[environ["PATH_INFO"]]
                body = json.dumps(dict(counts)).encode()
                if environ["REQUEST_METHOD"] == "DELETE":
                    self.counts.clear()
            start_response("200 OK", [("Content-Type", "application/json"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        if environ.get("PATH_INFO") == "/__hide_from_list":
            return self._hide(environ, start_response)
        with self.count_lock:
            self.counts[self._kind(environ)] += 1
        if self.hidden and self._kind(environ) == "LIST":
            return self._lagging_list(environ, start_response)
        if self.ignore_conditional:
            environ.pop("HTTP_IF_NONE_MATCH", None)
        if environ["REQUEST_METHOD"] not in _WRITES:
            return self.app(environ, start_response)
        key = environ.get("PATH_INFO", "/").strip("/")
        conditional = self._kind(environ) == "PUT-IF-ABSENT"
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
                if conditional:
                    self.conditional_puts[key] += 1
        return body


    def _hide(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """PUT /__hide_from_list?KEY: listings leave KEY out from now on; DELETE: show all."""
        with self.count_lock:
            if environ["REQUEST_METHOD"] == "DELETE":
                self.hidden.clear()
            else:
                self.hidden.add(urllib.parse.unquote(environ.get("QUERY_STRING", "")))
        start_response("200 OK", [("Content-Length", "0")])
        return [b""]

    def _lagging_list(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        answer: list[Any] = []

        def keep(code: str, headers: Any, *rest: Any) -> Any:
            answer.extend([code, headers])
            return lambda _data: None

        body = b"".join(self.app(environ, keep)).decode()
        bucket = environ.get("PATH_INFO", "/").strip("/")
        with self.count_lock:
            hidden = {k.removeprefix(f"{bucket}/") for k in self.hidden}
        body = re.sub(r"<Contents>.*?</Contents>",
                      lambda m: "" if re.search(r"<Key>(.*?)</Key>", m.group(0))[1] in hidden
                      else m.group(0), body, flags=re.S)
        data = body.encode()
        headers = [(k, v) for k, v in answer[1] if k.lower() != "content-length"]
        start_response(answer[0], [*headers, ("Content-Length", str(len(data)))])
        return [data]


def main(argv: list[str]) -> int:
    app = Middleware(DomainDispatcherApplication(create_backend_app),
                     ignore_conditional="--ignore-conditional" in argv)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
