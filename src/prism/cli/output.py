"""How every `prism` command speaks: results on stdout, errors on stderr.

With --json each result and each error is one JSON document on one line (JSON lines), so a long-running
command such as `prism worker` can be read line by line and a one-shot command parsed whole.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import orjson
import typer

from prism.errors import PrismError

# Every command takes it (README "Operating Prism").
JSON_OPT = typer.Option(False, "--json", help="Print machine-readable JSON.")
# The exit code of a command refused for its arguments (Click's, for a missing or malformed option).
USAGE_EXIT = 2


def json_line(data: dict[str, Any]) -> str:
    return orjson.dumps(data).decode()


def emit(as_json: bool, data: dict[str, Any], text: str) -> None:
    if as_json:
        sys.stdout.write(json_line(data) + "\n")
    else:
        typer.echo(text)
    # `prism serve` prints the one-time demo key and then runs for hours: it must not sit in a pipe buffer.
    sys.stdout.flush()


def report_error(as_json: bool, exc: PrismError) -> None:
    """One line on stderr: `{"error", "message"}` with --json, else `error: <message> (<code>)`."""
    if as_json:
        sys.stderr.write(json_line({"error": exc.code, "message": exc.message}) + "\n")
        sys.stderr.flush()
    else:
        typer.echo(f"error: {exc.message} ({exc.code})", err=True)


def fail(as_json: bool, exc: PrismError, *, exit_code: int = 1) -> NoReturn:
    report_error(as_json, exc)
    raise typer.Exit(exit_code)
