"""A tiny scripted HTTP server on loopback: answers each request with the next scripted reply.

Used to prove the retry and timeout rules, which need a server that misbehaves on demand (late, or trickling
its answer byte by byte).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int
    body: dict[str, object]
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    trickle: float = 0.0  # seconds between the body's bytes, sent one by one
    header_trickle: float = 0.0  # seconds between the bytes of the status line and headers, sent one by one


@dataclass
class Script:
    replies: list[Reply]
    seen: list[tuple[str, str, float]] = field(default_factory=list)  # method, path, arrival time

    @property
    def base_url(self) -> str:
        return self._base_url

    _base_url: str = ""


def _head(status: int, headers: dict[str, str]) -> bytes:
    """The status line and headers of an answer, as they go on the wire."""
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@contextmanager
def scripted(*replies: Reply) -> Iterator[Script]:
    script = Script(list(replies))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            with lock:
                script.seen.append((self.command, self.path, time.monotonic()))
                reply = script.replies.pop(0) if len(script.replies) > 1 else script.replies[0]
            if reply.delay:
                time.sleep(reply.delay)
            payload = json.dumps(reply.body).encode()
            headers = {"Content-Type": "application/json", "Content-Length": str(len(payload)), **reply.headers}
            try:
                if reply.header_trickle:
                    self._trickle(_head(reply.status, headers), reply.header_trickle)
                else:
                    self.send_response(reply.status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                if reply.trickle:
                    self._trickle(payload, reply.trickle)
                else:
                    self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                pass

        def _trickle(self, payload: bytes, pause: float) -> None:
            for byte in payload:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(pause)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    script._base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield script
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
