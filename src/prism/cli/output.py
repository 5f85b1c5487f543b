from __future__ import annotations

import sys
from typing import Any

import orjson
import typer

from prism.errors import PrismError


def emit(as_json: bool, data: dict[str, Any], text: str) -> None:
    if as_json:
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        typer.echo(text)
    # `prism serve` prints the one-time demo key and then runs for hours: it must not sit in a pipe buffer.
    sys.stdout.flush()


def fail(as_json: bool, exc: PrismError) -> None:
    if as_json:
        sys.stdout.write(orjson.dumps({"error": exc.code, "message": exc.message}).decode() + "\n")
    else:
        typer.echo(f"error: {exc.message} ({exc.code})", err=True)
    raise typer.Exit(1)
