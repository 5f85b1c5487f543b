"""The legacy HTTP+SSE transport (MCP 2024-11-05) on the same path as streamable HTTP.

GET opens an event stream whose first event, `endpoint`, names the URL to POST messages to
(`<path>?session_id=<id>`); each response is sent back on the stream as a `message` event. Idle streams
carry a keep-alive comment. The stream lives in the process that opened it, so its POSTs must reach that
process (one process, or sticky routing by `session_id`); the streamable HTTP transport has no such need.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from prism.auth.context import AuthContext
from prism.mcp_server.http import Receive, Send
from prism.mcp_server.jsonrpc import dumps

log = logging.getLogger("prism.mcp")
_CLOSED = object()


@dataclass(eq=False)
class LegacyStream:
    id: str
    tenant_id: str
    credential_id: str
    outbox: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)

    def owned_by(self, auth: AuthContext) -> bool:
        return auth.tenant_id == self.tenant_id and auth.credential_id == self.credential_id


class LegacyStreams:
    """The open legacy streams of this process."""

    def __init__(self) -> None:
        self._streams: dict[str, LegacyStream] = {}

    def __len__(self) -> int:
        return len(self._streams)

    def open(self, auth: AuthContext) -> LegacyStream:
        stream = LegacyStream(secrets.token_urlsafe(24), auth.tenant_id, auth.credential_id)
        self._streams[stream.id] = stream
        return stream

    def find(self, stream_id: str, auth: AuthContext) -> LegacyStream | None:
        """The stream, if it is open here and was opened by this same credential."""
        stream = self._streams.get(stream_id)
        return stream if stream is not None and stream.owned_by(auth) else None

    def close(self, stream: LegacyStream) -> None:
        self._streams.pop(stream.id, None)

    def close_all(self) -> None:
        for stream in list(self._streams.values()):
            stream.outbox.put_nowait(_CLOSED)


async def serve_stream(streams: LegacyStreams, stream: LegacyStream, endpoint: str, receive: Receive, send: Send,
                       headers: list[tuple[bytes, bytes]], *, keepalive: float) -> None:
    """Run one stream until the client leaves or the server shuts down; nothing outlives it."""

    async def watch_disconnect() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        stream.outbox.put_nowait(_CLOSED)

    watcher = asyncio.create_task(watch_disconnect())
    try:
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream"), (b"cache-control", b"no-store"),
            (b"x-accel-buffering", b"no"), *headers]})
        await _event(send, b"event: endpoint\ndata: " + endpoint.encode() + b"\n\n")
        while True:
            try:
                item = await asyncio.wait_for(stream.outbox.get(), timeout=keepalive)
            except TimeoutError:
                await _event(send, b": keep-alive\n\n")
                continue
            if item is _CLOSED:
                break
            await _event(send, b"event: message\ndata: " + dumps(item) + b"\n\n")
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        log.debug("legacy SSE client %s went away", stream.id)
    finally:
        streams.close(stream)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def _event(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})
