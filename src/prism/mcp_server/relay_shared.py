"""What the two shared legacy SSE relays (Redis, PostgreSQL) do alike: claiming, refreshing and releasing streams
in the order HeldClaims keeps (prism.mcp_server.relay), over one listening connection per process
(prism.mcp_server.relay_listener). Each store says how a claim is written, extended, dropped and read, and how a
message is published."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from prism.mcp_server.relay import HeldClaims, RelayUnavailable, StreamOwner
from prism.mcp_server.relay_listener import SharedListener

log = logging.getLogger("prism.mcp")


class SharedRelay(ABC):
    shared = True
    store: ClassVar[str]  # for the logs
    # What the store's client raises when the store cannot be reached.
    unreachable: ClassVar[tuple[type[BaseException], ...]]

    def __init__(self, listener: SharedListener[Any]) -> None:
        self.listener = listener
        self._claims = HeldClaims()

    async def claim(self, stream_id: str, owner: StreamOwner) -> None:
        try:
            await self.listener.listen(stream_id)
            async with self._claims.writing:
                await self._record({stream_id: owner})
                self._claims.hold(stream_id, owner)
        except Exception as exc:
            log.warning("could not claim legacy SSE stream %s in %s", stream_id, self.store, exc_info=True)
            await self.listener.unlisten(stream_id)
            raise RelayUnavailable() from exc

    async def refresh(self) -> None:
        try:
            lapsed = await self._extend(self._claims.ids())
            if lapsed:
                await self._restore(lapsed)
        except self.unreachable as exc:
            raise RelayUnavailable() from exc

    async def release(self, stream_id: str) -> None:
        # The claim first: from then on no POST is accepted for the stream, so none is answered into the void.
        async with self._claims.writing:
            self._claims.let_go(stream_id)
            try:
                await self._drop(stream_id)
            except self.unreachable:
                log.warning("could not drop the claim of legacy SSE stream %s; it expires by itself", stream_id,
                            exc_info=True)
        await self.listener.unlisten(stream_id)

    async def close(self) -> None:
        # The app's shutdown ends its streams without waiting for them: the claims they still hold go here.
        for stream_id in self._claims.ids():
            await self.release(stream_id)
        await self.listener.close()

    async def _restore(self, lapsed: list[str]) -> None:
        """Record again the claims that lapsed while their streams stayed open (HeldClaims)."""
        async with self._claims.writing:
            await self._record(self._claims.still_held(lapsed))

    @abstractmethod
    async def owner(self, stream_id: str) -> StreamOwner | None:
        """Relay.owner."""

    @abstractmethod
    async def publish(self, stream_id: str, message: bytes) -> None:
        """Relay.publish."""

    @abstractmethod
    async def _record(self, owners: dict[str, StreamOwner]) -> None:
        """Write these claims, each lasting STREAM_TTL_SECONDS (called under `writing`)."""

    @abstractmethod
    async def _extend(self, stream_ids: list[str]) -> list[str]:
        """Push these claims forward by STREAM_TTL_SECONDS, touching only claims that exist (a claim dropped
        meanwhile stays dropped); the ids of those that no longer exist."""

    @abstractmethod
    async def _drop(self, stream_id: str) -> None:
        """Remove the stream's claim (called under `writing`)."""
