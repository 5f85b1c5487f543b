"""Imported integrations in a running process: the registry it serves is rebuilt when they change.

A registry is never changed once frozen: every view of it (search index, descriptors, tool lists, visibility)
is cached per registry. When an integration is imported, re-imported or removed, the process builds a new
registry — the built-in handlers plus every integration's — off the event loop and swaps it in; calls in
flight finish on the one they started with. When only connections change, the registry stays and its
`enablement` (organization → integrations it enabled) is replaced whole.

Every change bumps the one-row `integration_generation`. The process that made it refreshes at once, after
its transaction commits; every other process (another `prism serve` worker, a server the CLI imported into)
compares the number every `PRISM_INTEGRATIONS_REFRESH_SECONDS` and refreshes when it moved.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from weakref import WeakKeyDictionary

from sqlalchemy import Row, Text, cast, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from prism.integrations.handlers import build_app
from prism.integrations.models import IntegrationApp, IntegrationConnection, IntegrationGeneration
from prism.integrations.stored import decoded
from prism.kit.collector import building_long_lived, paused_in_server
from prism.kit.heap import release_freed_memory
from prism.registry import HandlerApp, Registry, search
from prism.storage import Database
from prism.storage.errors import unavailable_error

log = logging.getLogger("prism.integrations")

_RUNTIMES: WeakKeyDictionary[Registry, IntegrationRuntime] = WeakKeyDictionary()


def runtime_of(registry: Registry) -> IntegrationRuntime | None:
    """The runtime serving `registry` (None in a process that serves nothing: the CLI)."""
    return _RUNTIMES.get(registry)


async def bump_generation(session: AsyncSession) -> None:
    """Tell every process that integrations or connections changed (in the transaction that changed them)."""
    result = await session.execute(update(IntegrationGeneration).where(IntegrationGeneration.id == 1)
                                   .values(generation=IntegrationGeneration.generation + 1))
    if getattr(result, "rowcount", 0):
        return
    try:
        async with session.begin_nested():
            session.add(IntegrationGeneration(id=1, generation=1))
    except IntegrityError:  # another transaction made the row first
        await session.execute(update(IntegrationGeneration).where(IntegrationGeneration.id == 1)
                              .values(generation=IntegrationGeneration.generation + 1))


async def read_generation(session: AsyncSession) -> int:
    value = (await session.execute(select(IntegrationGeneration.generation)
                                   .where(IntegrationGeneration.id == 1))).scalar()
    return int(value or 0)


class IntegrationRuntime:
    def __init__(self, db: Database, base: Registry, install: Callable[[Registry], None]) -> None:
        self.db, self._base, self._install = db, base, install
        self._generation: int | None = None
        self._built: dict[str, tuple[int, HandlerApp]] = {}  # integration id -> (revision, its app)
        self._lock = asyncio.Lock()
        self.registry = base
        self._base_serves_integrations = any(h.integration is not None for h in base)
        self._warming: asyncio.Task[None] | None = None
        self._to_warm: Registry | None = None  # the served registry whose index is still to be built
        # Apps built on one registry object (create_app(registry=...)) share it until they serve registries of
        # their own: calls on it refresh the first app's runtime; the others follow within the refresh interval.
        _RUNTIMES.setdefault(base, self)

    async def refresh(self, *, force: bool = False) -> bool:
        """Reload what changed since the last refresh; True when the registry or the enablement changed."""
        # Reading and building allocate hundreds of thousands of long-lived objects and almost no garbage: the
        # collector would walk them again and again (at 10,000 handlers, most of the time; prism.kit.collector).
        async with self._lock:
            with paused_in_server():
                return await self._refresh(force)

    async def _refresh(self, force: bool) -> bool:
        async with self.db.read() as session:
            generation = await read_generation(session)
            if generation == self._generation and not force:
                return False
            listed = (await session.execute(select(
                IntegrationApp.id, IntegrationApp.name, IntegrationApp.revision, IntegrationApp.title,
                IntegrationApp.description).order_by(IntegrationApp.name))).all()
            stale = [row.id for row in listed if self._built.get(row.id, (None,))[0] != row.revision]
            stored: dict[str, str] = {}  # as text: decoded with the registry, off the event loop
            if stale:
                stored = dict((await session.execute(
                    select(IntegrationApp.id, cast(IntegrationApp.operations, Text))
                    .where(IntegrationApp.id.in_(stale)))).all())
            enabled = (await session.execute(
                select(IntegrationConnection.organization_id, IntegrationApp.name)
                .join(IntegrationApp, IntegrationApp.id == IntegrationConnection.integration_id)
                .where(IntegrationConnection.enabled.is_(True)))).all()
        enablement: dict[str, set[str]] = {}
        for organization_id, name in enabled:
            enablement.setdefault(organization_id, set()).add(name)
        frozen_enablement = {org: frozenset(names) for org, names in enablement.items()}
        changed_apps = (bool(stale) or set(self._built) != {row.id for row in listed}
                        or (self.registry is self._base and self._base_serves_integrations))
        if changed_apps:
            built = {row.id: self._built[row.id] for row in listed if row.id not in stale}
            registry = await asyncio.to_thread(self._assemble, listed, built, stored)
            registry.enablement = frozen_enablement
            self._built = built
            self.registry = registry
            _RUNTIMES[registry] = self
            self._install(registry)
            # Served from now on; its search index (~1 s at 10,000 handlers) follows on the index builder's thread
            # (search.on_index_builder), and a search that comes first waits for it after its call is committed
            # (apps/core/handlers.py).
            self._warm_later(registry)
        else:
            self.registry.enablement = frozen_enablement
        self._generation = generation
        return True

    def _warm_later(self, registry: Registry) -> None:
        """One index build at a time, for the registry served when it starts: a build cannot be stopped, so
        imports in quick succession would otherwise build an index for every registry in between, each holding
        its memory until it is done."""
        self._to_warm = registry
        if self._warming is None or self._warming.done():
            self._warming = asyncio.create_task(self._warm_served())
            self._warming.add_done_callback(_report_failure)

    async def _warm_served(self) -> None:
        while self._to_warm is not None:
            registry, self._to_warm = self._to_warm, None
            await search.on_index_builder(_warm_search, registry)

    def _assemble(self, listed: Sequence[Row[str, str, int, str, str]],
                  built: dict[str, tuple[int, HandlerApp]], stored: dict[str, str]) -> Registry:
        """The built-in handlers and every integration's, frozen and indexed for search (off the loop).
        `built` holds the apps still current; those of `stored` (their operations as stored) join it: decoded
        here too, since at 10,000 handlers that is ~0.4 s the event loop would otherwise stand still."""
        for row in listed:
            if row.id in stored:
                built[row.id] = (row.revision, build_app(row.name, row.description or row.title,
                                                         decoded(stored[row.id]) or []))
        apps = [built[row.id][1] for row in listed if row.id in built]
        registry = Registry()
        # A base that is itself a served registry (an app built with another app's registry) brings its
        # integrations along: only its own handlers are kept, the integrations are today's.
        for handler in self._base:
            if handler.integration is None:
                registry.add(handler)
        registry.apps.update({name: app for name, app in self._base.apps.items()
                              if not any(h.integration is not None for h in app.handlers)})
        for app in apps:
            if app.name in registry.apps:  # an app of the deployment's own code keeps its name
                log.error("integration %s is not served: an installed app has that name", app.name)
                continue
            registry.add_app(app)
        registry.freeze()
        return registry

    async def first_load(self) -> None:
        """At start-up: serve what is imported. A database that cannot be reached or is not migrated yet must not
        keep the server from starting (its /readyz says what is wrong); `watch` loads them once it can."""
        try:
            await self.refresh(force=True)
        except Exception as exc:
            if not _database_not_ready(exc):
                raise
            log.warning("imported integrations are not loaded yet (%s); trying again", exc)

    async def watch(self, interval: float) -> None:
        """Refresh whenever another process changed something; runs until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not _database_not_ready(exc):
                    log.exception("could not refresh imported integrations")
                else:  # down, restarting or not migrated yet: one line each time, no traceback
                    log.warning("could not refresh imported integrations: %s", exc)


def _warm_search(registry: Registry) -> None:
    with building_long_lived():
        search.warm([registry])
    release_freed_memory()  # what decoding, building and indexing freed (prism.kit.heap)


def _report_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:  # the first search builds it instead
        log.error("could not build the search index", exc_info=task.exception())


def _database_not_ready(exc: BaseException) -> bool:
    """Busy or unreachable (prism.storage.errors), or a database whose schema is not migrated yet: a statement the
    database refuses as such (no such table) rather than a bug in Prism's own code."""
    return unavailable_error(exc) is not None or isinstance(exc, DBAPIError)


async def stop(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
