"""A stand-in for the master's REST API in the Python tests: a real HTTP server on loopback
that records each request and answers from a table of canned JSON replies."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any, Callable, Union

Reply = tuple[int, Any]
Handler = Union[Reply, Callable[[dict[str, Any]], Reply]]


class RestServer:
    """routes: {(method, path with query): (status, json) or a function of the request}."""

    def __init__(self, routes: dict[tuple[str, str], Handler]) -> None:
        self.routes = routes
        self.requests: list[dict[str, Any]] = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def handle_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                request = {"method": self.command, "path": self.path,
                           "headers": dict(self.headers),
                           "body": json.loads(raw) if raw else None}
                outer.requests.append(request)
                handler = outer.routes.get((self.command, self.path))
                if handler is None:
                    status, answer = 404, {"code": 5, "message": f"no route {self.command} "
                                                               f"{self.path}", "errors": []}
                else:
                    status, answer = handler(request) if callable(handler) else handler
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = handle_any

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
