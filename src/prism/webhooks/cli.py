"""`prism worker`: delivery workers as a process of their own (run as many, on as many hosts, as needed)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import typer

from prism.config import get_settings


def worker(concurrency: int = typer.Option(
               0, "--concurrency", min=0, help="Deliveries in flight (default: the setting)."),
           workers: int = typer.Option(1, "--workers", min=1, help="Worker loops in this process.")) -> None:
    """Deliver webhook events until interrupted (Ctrl-C or SIGTERM)."""
    from prism.webhooks.tasks import run_workers

    settings = get_settings()
    if concurrency:
        settings = settings.model_copy(update={"webhook_worker_concurrency": concurrency})
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    typer.echo(f"prism worker: {workers} loop(s), {settings.webhook_worker_concurrency} deliveries in flight each")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_workers(settings, workers))
