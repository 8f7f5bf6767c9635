"""A scripted admin API on loopback for unit tests of the admin client: each request gets the next scripted status
(and body, Location and headers), and every request's method, path and Authorization header are recorded. Shared by
test_admin_http and test_topic_existence (a test module never imports another)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# A step: a status, (status, body), (status, body, Location) or (status, body, Location or None, headers).
Step = int | tuple


class Scripted(BaseHTTPRequestHandler):
    statuses: list[Step] = []  # served in order; 200 [] once used up
    seen_auth: list[str | None] = []  # the Authorization header of every request, in order
    seen: list[tuple[str, str]] = []  # (method, path) of every request, in order
    delay_s = 0.0  # how long to wait before answering (a broker that does not answer in time)

    def _answer(self, with_body: bool) -> None:
        type(self).seen_auth.append(self.headers.get("Authorization"))
        type(self).seen.append((self.command, self.path))
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        # The answer is taken from the script as the request arrives: a slow answer still sleeping when its test ended
        # (daemon handler threads outlive the server) must not take the next test's first step.
        step = type(self).statuses.pop(0) if type(self).statuses else 200
        time.sleep(type(self).delay_s)
        status, body = step[:2] if isinstance(step, tuple) else (step, b"[]" if step == 200 else b"broker is restarting")
        self.send_response(status)
        if isinstance(step, tuple) and len(step) >= 3 and step[2]:
            self.send_header("Location", step[2])  # a redirect to the topic's owner broker
        for name, value in (step[3] if isinstance(step, tuple) and len(step) == 4 else {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(with_body=True)

    do_PUT = do_POST = do_DELETE = do_GET  # noqa: N815

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(with_body=False)

    def log_message(self, *args) -> None:
        pass


def serve(host: str = "127.0.0.1") -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, 0), Scripted)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@contextmanager
def scripted_admin_api() -> Iterator[ThreadingHTTPServer]:
    """A fresh script and a server answering by it, shut down after."""
    Scripted.statuses, Scripted.seen_auth, Scripted.seen, Scripted.delay_s = [], [], [], 0.0
    server = serve()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


