"""The legacy HTTP+SSE transport (MCP 2024-11-05) on the same path as streamable HTTP.

GET opens an event stream whose first event, `endpoint`, names the URL to POST messages to
(`<path>?session_id=<id>`); each response is sent back on the stream as a `message` event. Idle streams
carry a keep-alive comment.

The stream lives in the process that opened it, but its POSTs may land on any process of the deployment: the
stream is claimed through a relay (prism.mcp_server.relay) before its endpoint is announced, the process a POST
lands on checks that claim and runs the messages, and the answers travel back to the owner through the relay
(directly, when the POST landed on the owner itself).

Answers wait in the stream's outbox until they are written, and a client that never reads its stream would let
them pile up without end (the write of the first one waits for the client): once MAX_PENDING_BYTES wait, the
stream is ended and forgotten, as a client that went away. Its POSTs then answer 404, and it reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prism.auth.context import AuthContext
from prism.config import Settings
from prism.errors import PrismError
from prism.mcp_server.http import Receive, Send
from prism.mcp_server.jsonrpc import dumps
from prism.mcp_server.relay import REFRESH_SECONDS, RelayUnavailable, StreamOwner, relay_for

if TYPE_CHECKING:
    from prism.storage import Database

log = logging.getLogger("prism.mcp")
_CLOSED = object()
# What `open` issues: anything else named in a POST is no stream, and is refused before any store is asked.
_STREAM_ID = re.compile(r"[0-9a-f]{40}")
# Answers waiting to be written on one stream, at most: many pages of tools, far more than a client that reads
# its stream ever leaves waiting. One answer alone is always taken, whatever its size.
MAX_PENDING_BYTES = 8 * 1024 * 1024


class TooManyStreams(PrismError):
    code, status = "too_many_streams", 429

    def __init__(self, limit: int) -> None:
        super().__init__(f"this credential already holds {limit} open legacy SSE streams here "
                         "(PRISM_MCP_SSE_MAX_STREAMS_PER_CREDENTIAL): close one first")


@dataclass(eq=False)
class LegacyStream:
    id: str
    owner: StreamOwner
    # JSON-RPC messages to write, already encoded (a relayed one arrives as bytes), or _CLOSED.
    outbox: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    # The bytes of the messages taken and not yet written (the one being written included).
    pending_bytes: int = 0
    # Ended by Prism (its client did not read it, or the relay lost its subscription): closed to POSTs at once,
    # while it is being closed.
    ended: bool = False


class LegacyStreams:
    """The open legacy streams of this process, and the relay that shares them with the deployment's others."""

    def __init__(self, settings: Settings, db: Database) -> None:
        self._streams: dict[str, LegacyStream] = {}
        self.relay = relay_for(settings, db, self)
        self.max_per_credential = settings.mcp_sse_max_streams_per_credential
        self._refresher: asyncio.Task[None] | None = None
        # The closing of streams ended by a synchronous caller (deliver, lost), kept until done.
        self._closing: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._streams)

    async def open(self, auth: AuthContext) -> LegacyStream:
        """A new stream, claimed for `auth`'s credential. RelayUnavailable when it cannot be shared."""
        owner = StreamOwner.of(auth)
        if sum(1 for open_stream in self._streams.values() if open_stream.owner == owner) >= self.max_per_credential:
            raise TooManyStreams(self.max_per_credential)
        stream = LegacyStream(secrets.token_hex(20), owner)
        self._streams[stream.id] = stream
        try:
            await self.relay.claim(stream.id, stream.owner)
        except BaseException:
            await self.close(stream)
            raise
        if self.relay.shared and self._refresher is None:
            self._refresher = asyncio.create_task(self._refresh_forever())
        return stream

    async def is_open_for(self, stream_id: str, auth: AuthContext) -> bool:
        """Whether the stream is open, in any process, and was opened by this same credential."""
        stream = self._streams.get(stream_id)
        if stream is not None:
            return not stream.ended and stream.owner.matches(auth)
        if not _STREAM_ID.fullmatch(stream_id):
            return False
        owner = await self.relay.owner(stream_id)
        return owner is not None and owner.matches(auth)

    async def send(self, stream_id: str, messages: list[Any]) -> None:
        """Write JSON-RPC messages on the stream, wherever it is open. Called once the POST is answered: a
        failure can only be logged (the stream's client learns of it by the answer that never comes)."""
        for message in messages:
            encoded = dumps(message)
            if stream_id in self._streams:
                self.deliver(stream_id, encoded)
                continue
            try:
                await self.relay.publish(stream_id, encoded)
            except RelayUnavailable:
                log.warning("an answer for legacy SSE stream %s could not be relayed", stream_id, exc_info=True)
                return

    def deliver(self, stream_id: str, message: bytes) -> None:
        stream = self._streams.get(stream_id)
        if stream is None or stream.ended:  # it closed meanwhile: nobody is left to read the answer
            return
        if stream.pending_bytes and stream.pending_bytes + len(message) > MAX_PENDING_BYTES:
            log.warning("legacy SSE stream %s ended: its client left %d bytes of answers unread", stream_id,
                        stream.pending_bytes)
            self._abandon(stream)
            return
        stream.pending_bytes += len(message)
        stream.outbox.put_nowait(message)

    def lost(self, stream_id: str) -> None:
        """The relay can bring nothing more to the stream: it ends now, closed to POSTs and its claim dropped at once
        rather than when its writer gets to the end (which waits for a client that reads slowly, or not at all):
        until then its claim would be kept, and the POSTs it accepted answered into the void. What already waits
        in its outbox is still written."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.ended:
            return
        # Debug only: the relay logs one warning for all the streams of a connection that dropped.
        log.debug("legacy SSE stream %s ended: its answers can no longer reach this process", stream_id)
        self._end(stream)

    async def close(self, stream: LegacyStream) -> None:
        if self._streams.pop(stream.id, None) is None:
            return
        if not self._streams and self._refresher is not None:
            self._refresher.cancel()
            self._refresher = None
        await self.relay.release(stream.id)

    def _abandon(self, stream: LegacyStream) -> None:
        """End a stream whose client does not read it: its answers are dropped at once (its writer may wait for
        the client as long as the connection stays)."""
        while not stream.outbox.empty():
            stream.outbox.get_nowait()
        self._end(stream)

    def _end(self, stream: LegacyStream) -> None:
        """Close the stream to POSTs now, tell its writer to stop after what waits in its outbox, and close it
        (its claim and subscription dropped) without waiting for the writer."""
        stream.ended = True
        stream.outbox.put_nowait(_CLOSED)
        closing = asyncio.create_task(self.close(stream))
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    def close_all(self) -> None:
        for stream in list(self._streams.values()):
            stream.outbox.put_nowait(_CLOSED)

    async def aclose(self) -> None:
        """End every stream and close the relay's connections (the app's shutdown)."""
        self.close_all()
        if self._refresher is not None:
            self._refresher.cancel()
            self._refresher = None
        await self.relay.close()

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                await self.relay.refresh()
            except RelayUnavailable:  # the claims last STREAM_TTL_SECONDS: the next round may still save them
                log.warning("could not refresh the claims of %d legacy SSE stream(s)", len(self._streams),
                            exc_info=True)
            except Exception:  # nothing would restart the refreshing: every open stream's claim would lapse
                log.exception("refreshing the claims of %d legacy SSE stream(s) failed", len(self._streams))


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
            await _event(send, b"event: message\ndata: " + item + b"\n\n")
            stream.pending_bytes -= len(item)
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        log.debug("legacy SSE client %s went away", stream.id)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        await streams.close(stream)


async def _event(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})
