"""`prism worker`: delivery workers as a process of their own (run as many, on as many hosts, as needed)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import typer

from prism.cli.output import emit, fail, json_line
from prism.errors import PrismError


class JsonLineFormatter(logging.Formatter):
    """With --json the worker's log is JSON lines too: one document per record, on stderr."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json_line(entry)


def worker(concurrency: int = typer.Option(
               0, "--concurrency", min=0, help="Deliveries in flight (default: the setting)."),
           workers: int = typer.Option(1, "--workers", min=1, help="Worker loops in this process."),
           as_json: bool = typer.Option(False, "--json", help="Print JSON lines (start, stop, log records).")) -> None:
    """Deliver webhook events until interrupted (Ctrl-C or SIGTERM)."""
    from prism.cli.preflight import check_database_reachable, database_settings
    from prism.webhooks.tasks import run_workers

    try:
        settings = database_settings(may_create=False)
        check_database_reachable(settings.database_url)
    except PrismError as exc:
        fail(as_json, exc)
    if concurrency:
        settings = settings.model_copy(update={"webhook_worker_concurrency": concurrency})
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLineFormatter() if as_json else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    # Uvicorn's `trace` (finer than debug) has no level of the logging module: debug is Prism's finest.
    logging.basicConfig(level="DEBUG" if settings.log_level == "trace" else settings.log_level.upper(),
                        handlers=[handler])
    in_flight = settings.webhook_worker_concurrency

    def started() -> None:
        emit(as_json, {"event": "started", "loops": workers, "concurrency": in_flight},
             f"prism worker: {workers} loop(s), {in_flight} deliveries in flight each")

    with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C while stopping
        asyncio.run(run_workers(settings, workers, started=started))
    emit(as_json, {"event": "stopped"}, "prism worker stopped")
