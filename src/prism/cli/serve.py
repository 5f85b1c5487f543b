"""`prism serve`: check the settings, migrate, serve; once listening, seed the demo workspace and print the banner."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import typer
import uvicorn
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from starlette.applications import Starlette

from prism.cli.listening import bind_listener, run_listening
from prism.cli.output import USAGE_EXIT, emit, fail
from prism.cli.preflight import (
    ConfigurationError,
    check_apps,
    check_database_reachable,
    check_database_url,
    check_redis,
    check_tracing,
    database_error,
    default_database_in_use,
    load_settings,
)
from prism.config import Settings, get_settings
from prism.errors import PrismError
from prism.kit.collector import collector_paused, start_serving
from prism.kit.secret import check_master_secret
from prism.ledger.checkpoints import MalformedCheckpoint, parse_checkpoint
from prism.ledger.entries import audit_heads
from prism.ledger.keys import LedgerKeys
from prism.migrate import upgrade
from prism.observability.logs import configure_logging
from prism.seed import DemoWorkspace, is_empty, seed_demo
from prism.storage import Database, backend_of, one_shot_engine

# Allocations between collections of the youngest generation in a served process (Python's default: 700); the
# measurements behind the number are in bench/README.md.
YOUNG_GENERATION_THRESHOLD = 5000

# SQLite has one writer at a time and the webhook queue one claimer on it: several worker processes would only
# queue behind each other's write lock (docs/architecture.md "Storage"). Exit code 2: a refused option.
SQLITE_WORKERS_REFUSAL = ("--workers {workers} needs PostgreSQL: SQLite serves from one process. Run --workers 1, "
                          "or set PRISM_DATABASE_URL to a PostgreSQL database to run several workers.")

# Without Redis each worker keeps its own counters: a client whose connections the kernel spreads over N workers
# gets N times every ceiling and N times ten guesses before the lockout. Silently weaker limits are refused, like
# SQLite with several workers (exit code 2), unless the operator says they are accepted.
PER_PROCESS_LIMITS_REFUSAL = ("--workers {workers} without PRISM_REDIS_URL would count rate limits and the lockout "
                              "in each worker: every ceiling and the lockout threshold {workers} times their "
                              "settings. Set PRISM_REDIS_URL to share the counters, run --workers 1, or set "
                              "PRISM_RATE_LIMIT_PER_PROCESS=true to accept per-process limits.")
REFUSED_OPTIONS = frozenset({"sqlite_single_process", "per_process_limits"})
# Accepted, the weaker limits are still said once at start-up, where an operator reading the log looks.
PER_PROCESS_LIMITS_WARNING = ("rate limits and the lockout are counted per process (PRISM_RATE_LIMIT_PER_PROCESS="
                              "true, no PRISM_REDIS_URL): with --workers {workers} a client may get up to {workers} "
                              "times every ceiling and {workers} times the lockout's failed authentications")


def should_seed(settings: Settings, requested: bool | None) -> bool:
    """--seed-demo/--no-seed-demo, else PRISM_SEED_DEMO, else only on the embedded default database: a demo
    tenant with a known admin does not belong in a database server someone pointed Prism at."""
    if requested is not None:
        return requested
    if settings.seed_demo is not None:
        return settings.seed_demo
    return default_database_in_use(settings)


async def _seed_if_empty(settings: Settings) -> DemoWorkspace | None:
    url = settings.database_url
    db = Database(url)
    try:
        async with db.write() as session:
            return await seed_demo(session, LedgerKeys(settings)) if await is_empty(session) else None
    except IntegrityError:  # another process seeded the same empty database at the same moment
        return None
    except (SQLAlchemyError, OSError) as exc:
        raise database_error(url, getattr(exc, "orig", None) or exc) from None
    finally:
        await db.dispose()


def _banner(demo: DemoWorkspace | None, host: str, port: int) -> tuple[dict[str, Any], str]:
    """What `prism serve` prints once listening on `host` and `port` (the socket's own address)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # noqa: S104
    if ":" in shown:  # an IPv6 literal is bracketed in a URL, and a zone's `%` is escaped (RFC 6874)
        shown = f"[{shown.replace('%', '%25')}]"
    base = f"http://{shown}:{port}"
    if demo is None:
        return {"url": base, "seeded": False}, (
            f"Prism listening on {base}\nMint a key: prism key create --tenant demo --email admin@demo.example.com")
    curl = (f"curl -s -X POST {base}/api/mcp/tools/prism_entity_crud/ -H 'Authorization: Bearer {demo.api_key}' "
            "-H 'Content-Type: application/json' "
            "-d '{\"app\":\"spare_parts\",\"entity\":\"spare_part\",\"operation\":\"list\",\"arguments\":{}}'")
    data = {"url": base, "seeded": True, "tenant": demo.tenant.subdomain, "api_key": demo.api_key,
            "admin_email": demo.admin_email, "admin_password": demo.admin_password, "curl": curl}
    text = "\n".join([
        f"Prism listening on {base}",
        f"Seeded tenant '{demo.tenant.subdomain}' (host {demo.tenant.subdomain}.{get_settings().base_domain}).",
        f"Admin: {demo.admin_email}" + (f" / password {demo.admin_password}" if demo.admin_password else ""),
        f"API key (shown once): {demo.api_key}",
        "Try it:",
        f"  {curl}",
    ])
    return data, text


def check_ledger_key(settings: Settings) -> None:
    """`invalid_setting` when the deployment's audit heads are signed with another key than this process's master
    secret gives, and none with its own: such a process would write entries under MACs the deployment's own
    processes cannot seal, and they would hold up every later entry of the organization. A database where some
    head carries this process's key is the deployment's (a head signed otherwise there is a broken log, which
    `prism audit verify` names, not a reason to refuse every process). One query when a head carries the key (the
    checkpoint's JSON as Prism writes it); otherwise the heads are parsed to be sure."""
    keys = LedgerKeys(settings)
    ours = f'%"key_id":"{keys.key_id}"%'

    async def foreign_key_id() -> str | None:
        engine = one_shot_engine(settings.database_url)
        try:
            async with engine.connect() as connection:
                if (await connection.execute(select(audit_heads.c.organization_id).where(
                        audit_heads.c.checkpoint.like(ours)).limit(1))).first() is not None:
                    return None
                rows = await connection.execute(select(audit_heads.c.checkpoint).where(
                    audit_heads.c.checkpoint.is_not(None)))
                other = None
                for (checkpoint,) in rows:
                    try:
                        key_id = parse_checkpoint(checkpoint).key_id
                    except MalformedCheckpoint:  # not a signed head at all: `prism audit verify` names it
                        continue
                    if key_id == keys.key_id:
                        return None
                    other = other or key_id
                return other
        finally:
            await engine.dispose()

    other = asyncio.run(foreign_key_id())
    if other is not None:
        source = "PRISM_SECRET_KEY" if settings.secret_key else f"PRISM_SECRET_KEY_FILE ({settings.secret_key_file})"
        raise ConfigurationError(
            f"the audit log in this database is signed with key {other}, and this process's master secret "
            f"({source}) gives key {keys.key_id}: every process of a deployment must use the same master secret, "
            "or the entries it writes can never be sealed (docs/deploy.md \"Secrets\")")


def warn_per_process_limits(settings: Settings, workers: int) -> None:
    """One WARNING line in the server's log (the workers configure their own logging once they start)."""
    configure_logging(settings.log_level, settings.log_format)
    logging.getLogger("prism.ratelimit").warning(PER_PROCESS_LIMITS_WARNING.format(workers=workers))


def serve(*, host: str, port: int, workers: int, as_json: bool, seed: bool | None) -> None:
    """Check the settings, migrate, listen; once listening, seed an empty database (when asked) and print the
    banner. A start that fails before that leaves the database unseeded, so the next one shows a usable key."""
    try:
        settings = load_settings()
        check_database_url(settings, may_create=True)  # before anything reads the URL
        if workers > 1 and backend_of(settings.database_url) == "sqlite":
            raise PrismError(SQLITE_WORKERS_REFUSAL.format(workers=workers), code="sqlite_single_process")
        if workers > 1 and not settings.redis_url:
            if not settings.rate_limit_per_process:
                raise PrismError(PER_PROCESS_LIMITS_REFUSAL.format(workers=workers), code="per_process_limits")
            warn_per_process_limits(settings, workers)
        check_master_secret(settings, may_create=True)
        check_apps(settings)
        check_redis(settings)
        check_tracing(settings)
        with collector_paused():  # a no-op when `prism serve` already paused it for the whole start-up
            if backend_of(settings.database_url) != "sqlite":
                check_database_reachable(settings.database_url)
            try:
                steps = upgrade(settings.database_url)
                check_ledger_key(settings)  # before this process seals or writes anything
                if steps:  # what only the upgrade does to the ledger (docs/audit.md "Upgrading")
                    from prism.cli.audit import seal_waiting_logs

                    seal_waiting_logs(sign_unsigned_heads=steps.sign_unsigned_heads,
                                      attest_as_found=steps.attest_as_found)
            except (SQLAlchemyError, OSError) as exc:
                raise database_error(settings.database_url, getattr(exc, "orig", None) or exc) from None
        listener = bind_listener(host, port, workers=workers)
        listening_on: tuple[str, int] = listener.getsockname()[:2]  # the port chosen for --port 0
    except PrismError as exc:
        fail(as_json, exc, exit_code=USAGE_EXIT if exc.code in REFUSED_OPTIONS else 1)
    seeding = should_seed(settings, seed)

    async def announce() -> None:
        demo = await _seed_if_empty(settings) if seeding else None
        data, text = _banner(demo, *listening_on)
        emit(as_json, data, text)

    # proxy_headers off: X-Forwarded-For counts only from PRISM_TRUSTED_PROXIES (prism.ratelimit.addresses), and
    # Uvicorn's own handling would trust loopback by default and rewrite the client address before Prism sees it.
    config = uvicorn.Config("prism.cli.serve:serving_app", factory=True, host=host, port=port, workers=workers,
                            log_level=settings.log_level, loop="uvloop", http="httptools",
                            access_log=False, server_header=False, proxy_headers=False,
                            timeout_graceful_shutdown=settings.shutdown_grace_seconds)
    with metrics_directory(workers):
        code = run_listening(config, listener, announce, as_json=as_json)
    if code:
        raise typer.Exit(code)


@contextmanager
def metrics_directory(workers: int) -> Iterator[None]:
    """Several workers keep their metrics in a private directory made before they start (they inherit its name in
    PROMETHEUS_MULTIPROC_DIR), so a scrape of any of them adds up all of them; removed when the server stops.
    One process keeps them in memory."""
    if workers <= 1:
        yield
        return
    directory = tempfile.mkdtemp(prefix="prism-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    try:
        yield
    finally:
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]
        shutil.rmtree(directory, ignore_errors=True)


def serving_app() -> Starlette:
    """The app of one `prism serve` worker process. The collector is kept out of start-up, and what start-up built
    (registry, schemas, search index: it lives as long as the process) is frozen out of its reach before it
    resumes (prism.kit.collector). This is process-wide tuning, so it lives here, not in the app factory."""
    from prism.app import create_app  # the server stack loads only in a serving process

    with collector_paused():
        app = create_app()
    start_serving()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *gc.get_threshold()[1:])
    stop_compiling_first()
    return app


def stop_compiling_first() -> None:
    """SIGTERM and SIGINT kill the children compiling imports (`compiling.stop_all`) before they reach Uvicorn's
    handler, which stops serving and waits up to PRISM_SHUTDOWN_GRACE_SECONDS for the requests in flight: an import
    whose compilation may take minutes (PRISM_INTEGRATION_COMPILE_SECONDS) is answered 503 `server_stopping` at once
    rather than holding the stop. Uvicorn has put its handlers in place when it calls `serving_app`, and puts back
    what it found once it has stopped."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may handle signals
        return
    from prism.integrations.compiling import stop_all  # the server stack loads only in a serving process

    for number in (signal.SIGTERM, signal.SIGINT):
        uvicorns = signal.getsignal(number)
        if callable(uvicorns):
            signal.signal(number, _first(stop_all, uvicorns))


def _first(stop: Callable[[], None], handler: Callable[[int, FrameType | None], Any]) \
        -> Callable[[int, FrameType | None], None]:
    def stopping(number: int, frame: FrameType | None) -> None:
        stop()
        handler(number, frame)

    return stopping
