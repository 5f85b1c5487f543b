"""`Authenticator.peek`: the caller `authenticate` would accept from its cache alone, awaiting and changing
nothing, or None (the edge then reserves an attempt and authenticates, prism.edge.stack). Both read one evaluation
of the cached entry, so they cannot disagree about a cached key."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from prism.auth.authenticator import Authenticator
from prism.errors import CredentialNoLongerValid, Unauthenticated
from prism.keys.service import lookup_of
from prism.kit.timeutil import utcnow
from prism.models import ApiKey
from prism.storage import Database
from prism.tenancy.hosts import classify_host
from tests.factories import Factory


async def test_peek_accepts_only_a_cached_key_that_authenticate_accepts(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    authenticator = Authenticator(db, cache_seconds=60)
    host, elsewhere = classify_host(ws.host, "localhost"), classify_host(other.host, "localhost")
    bearer = ws.headers()["Authorization"]
    guess = bearer[:-4] + ("AAAA" if not bearer.endswith("AAAA") else "BBBB")
    assert authenticator.peek(bearer, host) is None  # not cached yet (nor its tenant)
    accepted = await authenticator.authenticate(bearer, host)
    touched = accepted.usage.last_used_at
    assert authenticator.peek(bearer, host) is accepted
    assert authenticator.peek(bearer.replace("Bearer", "bearer"), host) is accepted
    assert accepted.usage.last_used_at is touched  # peeking records no use
    for refused in (guess, "Bearer " + "q" * 40, "Basic abc", "Bearer", None):
        assert authenticator.peek(refused, host) is None
    with pytest.raises(Unauthenticated):
        await authenticator.authenticate(guess, host)
    assert authenticator.peek(bearer, elsewhere) is None  # another tenant's host (not cached either)
    await authenticator.require_tenant_host(elsewhere)
    assert authenticator.peek(bearer, elsewhere) is None  # cached: a guess there, for `authenticate` to count
    with pytest.raises(Unauthenticated, match="another tenant"):
        await authenticator.authenticate(bearer, elsewhere)
    stale = Authenticator(db, cache_seconds=0)
    await stale.authenticate(bearer, host)
    assert stale.peek(bearer, host) is None  # the entry is never fresh


@pytest.mark.parametrize("change", ["revoked", "expired"])
async def test_peek_leaves_a_key_that_no_longer_works_to_authenticate(db: Database, factory: Factory,
                                                                      change: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    key = await factory.add_key(ws, change)
    bearer, host = f"Bearer {key}", classify_host(ws.host, "localhost")
    values = {"revoked_at": utcnow()} if change == "revoked" else {"expires_at": utcnow() - timedelta(seconds=5)}
    async with db.write() as session:
        await session.execute(update(ApiKey).where(ApiKey.lookup == lookup_of(key)).values(**values))
    authenticator = Authenticator(db, cache_seconds=60)
    with pytest.raises(CredentialNoLongerValid):
        await authenticator.authenticate(bearer, host)
    assert authenticator.peek(bearer, host) is None
