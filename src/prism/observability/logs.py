"""Prism's log lines on stdout: one JSON object per line (or `key=value` text for a terminal).

Every record of the `prism` loggers goes through one handler; structured fields travel in the record's
`fields` dict. The access line is built as a dict and serialized once with orjson: no format string, no
caller lookup (it is written once per request). Uvicorn's own loggers are left as Uvicorn configures them
(stderr), with its access log off.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

PRISM = logging.getLogger("prism")
ACCESS = logging.getLogger("prism.access")
SECURITY = logging.getLogger("prism.security")


class JsonFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        self.pid = os.getpid()  # made in the process that logs (each worker configures its own logging)
        self._second = -1
        self._second_text = ""

    def timestamp(self, created: float) -> str:
        """ISO 8601 in UTC to the millisecond; the text of the second is made once per second, not per line."""
        second = int(created)
        if second != self._second:
            self._second, self._second_text = second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{self._second_text}.{int((created - second) * 1000):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": self.timestamp(record.created), "level": record.levelname.lower(), "logger": record.name,
            "pid": self.pid, "message": record.getMessage()}
        fields = getattr(record, "fields", None)
        if fields:
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    """`time LEVEL logger message key=value…`, one line a record (a traceback follows, indented). What a
    client sent (a path, a header) may hold a line break once decoded: every control character of the message and
    the values is written escaped, so that no value can write a line of its own that reads as another record."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{self.formatTime(record)} {record.levelname} {record.name} {_escaped(record.getMessage())}"
        fields = getattr(record, "fields", None)
        if fields:
            text += " " + " ".join(f"{k}={_escaped(str(v))}" for k, v in fields.items() if v is not None)
        if record.exc_info:
            text += _indented(self.formatException(record.exc_info))
        if record.stack_info:
            text += _indented(self.formatStack(record.stack_info))
        return text


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _escaped(text: str) -> str:
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def _indented(block: str) -> str:
    """A traceback, each of its lines indented and escaped: an exception's text may carry what a client sent,
    and none of its lines may start where a record's line starts."""
    return "".join("\n  " + _escaped(line) for line in block.splitlines())


class StdoutHandler(logging.Handler):
    """Writes to whatever sys.stdout is when the record is emitted (a test's capture, the process's pipe).

    On the event loop's thread the stream is flushed once per turn of the loop, after every line written in that
    turn (a ledger batch answers its calls in one turn: their access lines leave in one write, not one write
    each); anywhere else, at once. A line waits at most for the rest of its turn.
    """

    def __init__(self) -> None:
        super().__init__()
        # The loop a flush is scheduled on, if any: a loop that closes before running it (asyncio.run ending)
        # must not leave a later loop's lines unflushed.
        self._flush_on: asyncio.AbstractEventLoop | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stdout
            stream.write(self.format(record) + "\n")
            self._flush_soon(stream)
        except Exception:
            self.handleError(record)

    def _flush_soon(self, stream: TextIO) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on an event loop's thread
            stream.flush()
            return
        if self._flush_on is not loop:
            self._flush_on = loop
            loop.call_soon(self._flush, stream)

    def _flush(self, stream: TextIO) -> None:
        self._flush_on = None
        try:
            stream.flush()
        except (OSError, ValueError):  # the stream was closed (the process is ending) or its reader went away
            pass


def configure_logging(level: str, log_format: str | None) -> None:
    """Install Prism's one handler on the `prism` logger (again: replacing the previous one)."""
    for old in [h for h in PRISM.handlers if isinstance(h, StdoutHandler)]:
        PRISM.removeHandler(old)
    handler = StdoutHandler()
    as_json = log_format == "json" or (log_format is None and not sys.stdout.isatty())
    handler.setFormatter(JsonFormatter() if as_json else TextFormatter())
    PRISM.addHandler(handler)
    # Thread and process names are in no Prism line; looking them up for every record is most of a record's cost.
    logging.logThreads = logging.logMultiprocessing = logging.logProcesses = False
    PRISM.setLevel("DEBUG" if level.lower() == "trace" else level.upper())  # Uvicorn's "trace" is finer


def write(logger: logging.Logger, level: int, message: str, fields: dict[str, Any]) -> None:
    """A structured record, without the caller lookup `logger.info(...)` makes."""
    if logger.isEnabledFor(level):
        record = logger.makeRecord(logger.name, level, "", 0, message, (), None)
        record.fields = fields
        logger.handle(record)


def security_event(event: str, **fields: Any) -> None:
    """A WARNING on `prism.security`: a refused credential, a lockout, a rate limit, a refused outbound target."""
    write(SECURITY, logging.WARNING, event, {"event": event, **fields})
