"""Running delivery workers: inside `prism serve` (by default) and as `prism worker` processes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable

from prism.config import Settings
from prism.storage import Database
from prism.webhooks.worker import DeliveryWorker

log = logging.getLogger("prism.webhooks")


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# How long a stop waits for deliveries already claimed to be sent and recorded: under the 10 s a container
# runtime gives a process between SIGTERM and SIGKILL. A send still running then is cancelled and retried later.
STOP_GRACE_SECONDS = 8.0


class RunningWorker:
    """A worker task and the means to stop it (its unfinished deliveries are retried after their lease)."""

    def __init__(self, worker: DeliveryWorker) -> None:
        self.worker = worker
        self.task = asyncio.create_task(self._run(), name="prism-webhook-worker")

    async def _run(self) -> None:
        while True:
            try:
                await self.worker.run()  # returns only when told to stop claiming
                return
            except asyncio.CancelledError:
                raise
            except Exception:  # a database outage must not end delivery for the life of the process
                log.exception("webhook worker stopped; restarting")
                await asyncio.sleep(1.0)

    async def stop(self, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
        """Stop claiming, let the claim in progress end and the deliveries already claimed be sent and recorded,
        all within `grace_seconds` (one budget: a claim waiting for the database must not double the time a stop
        takes); then cancel whatever is still running: its lease runs out and it is sent again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_seconds
        self.worker.stop_claiming()
        done, _ = await asyncio.wait({self.task}, timeout=grace_seconds)
        if not done:
            self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.worker.finish_in_flight(max(0.0, deadline - loop.time()))
        await self.worker.close()


async def stop_all(running: list[RunningWorker], grace_seconds: float = STOP_GRACE_SECONDS) -> None:
    """Stop every worker at once, so that a process of N loops stops within one grace, not N."""
    await asyncio.gather(*(r.stop(grace_seconds) for r in running))


def start_in_process(db: Database, settings: Settings) -> RunningWorker | None:
    """The worker `prism serve` runs beside the API, unless PRISM_WEBHOOK_WORKER_IN_PROCESS=false."""
    if not settings.webhook_worker_in_process:
        return None
    return RunningWorker(DeliveryWorker(db, settings))


async def run_workers(settings: Settings, count: int, *, started: Callable[[], None] | None = None) -> None:
    """`prism worker`: `count` workers in this process until Ctrl-C (SIGINT) or SIGTERM.

    Either signal stops the workers as `RunningWorker.stop` does: deliveries in flight finish and are recorded, so a
    service manager's stop never leaves a delivery claimed until its lease runs out. `started` is called once the
    workers run and the signals are handled, so whoever waits for it may stop the process from then on."""
    db = Database(settings.database_url)
    running = [RunningWorker(DeliveryWorker(db, settings)) for _ in range(count)]
    loop = asyncio.get_running_loop()
    told_to_stop = asyncio.Event()
    for stop_signal in STOP_SIGNALS:
        loop.add_signal_handler(stop_signal, told_to_stop.set)
    try:
        if started is not None:
            started()
        stopping = asyncio.ensure_future(told_to_stop.wait())
        done, _ = await asyncio.wait([stopping, *(r.task for r in running)], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        for task in done - {stopping}:
            task.result()  # a worker that ended on its own failed: its error is the command's
    finally:
        for stop_signal in STOP_SIGNALS:
            loop.remove_signal_handler(stop_signal)
        await stop_all(running)
        await db.dispose()
