"""Prism's log lines leave in one flush per turn of the event loop, and no line waits for a loop that is gone."""

from __future__ import annotations

import asyncio
import io
import logging

import pytest

from prism.observability.logs import ACCESS, configure_logging, write


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


@pytest.mark.engine_independent
def test_lines_of_one_turn_share_a_flush_and_a_closed_loop_leaves_none_waiting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    stream = CountingStream()
    monkeypatch.setattr("sys.stdout", stream)
    configure_logging("info", "json")

    async def three_lines() -> None:
        for n in range(3):
            write(ACCESS, logging.INFO, "request", {"n": n})

    async def interrupted() -> None:
        await three_lines()
        raise KeyboardInterrupt  # Ctrl-C: the loop stops at once, the flush it scheduled never runs

    closed = asyncio.new_event_loop()
    with pytest.raises(KeyboardInterrupt):
        closed.run_until_complete(interrupted())
    closed.close()
    assert stream.flushes == 0 and stream.getvalue().count("\n") == 3

    async def one_turn_later() -> None:
        await three_lines()
        await asyncio.sleep(0)

    asyncio.run(one_turn_later())
    assert stream.flushes == 1  # three lines, one flush, on the new loop
