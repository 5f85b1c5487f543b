"""`prism keys ...`: the OAuth token-signing keys (not API keys, which are `prism key ...`)."""

from __future__ import annotations

import typer
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.cli.output import JSON_OPT, emit
from prism.cli.transaction import in_transaction
from prism.config import get_settings
from prism.kit.timeutil import iso
from prism.oauth.keys import rotate
from prism.oauth.models import OAuthSigningKey

keys_cli = typer.Typer(help="OAuth token-signing keys (RS256, published in /.well-known/jwks.json).",
                       no_args_is_help=True)


@keys_cli.command("rotate")
def keys_rotate(as_json: bool = JSON_OPT) -> None:
    """Sign new tokens with a new key. Tokens signed before stay valid until they expire.

    Running servers pick the new key up within a minute (at once when they meet its kid).
    """
    async def work(session: AsyncSession) -> dict[str, str | None]:
        row = await rotate(session, get_settings())
        return {"kid": row.kid, "created_at": iso(row.created_at)}

    result = in_transaction(as_json, work)
    emit(as_json, result, f"new signing key {result['kid']}; previous keys stay published until their tokens expire")


@keys_cli.command("list")
def keys_list(as_json: bool = JSON_OPT) -> None:
    """Signing keys, newest first: the active one and the retired ones."""
    async def work(session: AsyncSession) -> list[dict[str, str | None]]:
        rows = (await session.execute(select(OAuthSigningKey).order_by(OAuthSigningKey.created_at.desc()))).scalars()
        return [{"kid": r.kid, "created_at": iso(r.created_at), "retired_at": iso(r.retired_at)} for r in rows]

    keys = in_transaction(as_json, work, read_only=True)
    lines = [f"{k['kid']}  {'active' if k['retired_at'] is None else 'retired ' + str(k['retired_at'])}"
             for k in keys]
    emit(as_json, {"keys": keys}, "\n".join(lines) or "no signing keys yet (one is made on first use)")
