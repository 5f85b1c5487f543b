"""`prism serve`: migrate, seed the demo workspace on an empty database, run Uvicorn."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import typer
import uvicorn
from starlette.applications import Starlette

from prism.cli.output import emit
from prism.config import Settings, get_settings
from prism.kit.collector import collector_paused, start_serving
from prism.ledger.keys import LedgerKeys
from prism.migrate import upgrade
from prism.seed import DemoWorkspace, is_empty, seed_demo
from prism.storage import Database, backend_of

# Allocations between collections of the youngest generation in a served process (Python's default: 700); the
# measurements behind the number are in bench/README.md.
YOUNG_GENERATION_THRESHOLD = 5000

# SQLite has one writer at a time and the webhook queue one claimer on it: several worker processes would only
# queue behind each other's write lock (docs/architecture.md "Storage"). Exit code 2: a refused option.
SQLITE_WORKERS_REFUSAL = ("--workers {workers} needs PostgreSQL: SQLite serves from one process. Run --workers 1, "
                          "or set PRISM_DATABASE_URL to a PostgreSQL database to run several workers.")


async def _seed_if_empty(settings: Settings) -> DemoWorkspace | None:
    db = Database(settings.database_url)
    try:
        async with db.write() as session:
            return await seed_demo(session, LedgerKeys(settings)) if await is_empty(session) else None
    finally:
        await db.dispose()


def _banner(demo: DemoWorkspace | None, host: str, port: int) -> tuple[dict[str, Any], str]:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # noqa: S104
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


def serve(*, host: str, port: int, workers: int, as_json: bool) -> None:
    """Migrate, seed the demo workspace on an empty database, print the banner, run Uvicorn."""
    settings = get_settings()
    if workers > 1 and backend_of(settings.database_url) == "sqlite":
        typer.echo(f"error: {SQLITE_WORKERS_REFUSAL.format(workers=workers)} (sqlite_single_process)", err=True)
        raise typer.Exit(code=2)
    with collector_paused():  # a no-op when `prism serve` already paused it for the whole start-up
        upgrade(settings.database_url)
        demo = asyncio.run(_seed_if_empty(settings)) if settings.seed_demo else None
    data, text = _banner(demo, host, port)
    emit(as_json, data, text)
    # proxy_headers off: X-Forwarded-For counts only from PRISM_TRUSTED_PROXIES (prism.ratelimit.addresses), and
    # Uvicorn's own handling would trust loopback by default and rewrite the client address before Prism sees it.
    uvicorn.run("prism.cli.serve:serving_app", factory=True, host=host, port=port, workers=workers,
                log_level=settings.log_level, loop="uvloop", http="httptools",
                access_log=False, server_header=False, proxy_headers=False)


def serving_app() -> Starlette:
    """The app of one `prism serve` worker process. The collector is kept out of start-up, and what start-up built
    (registry, schemas, search index: it lives as long as the process) is frozen out of its reach before it
    resumes (prism.kit.collector). This is process-wide tuning, so it lives here, not in the app factory."""
    from prism.app import create_app  # the server stack loads only in a serving process

    with collector_paused():
        app = create_app()
    start_serving()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *gc.get_threshold()[1:])
    return app
