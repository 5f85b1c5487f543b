"""A live API key sent to another tenant's host is refused there (401 invalid_token) but is not a guess: it does
not count toward the address lockout (SPEC values: ten failures in 60 s lock the address for 300 s), so a client
pointed at the wrong tenant's URL does not lock its address out of its own tenant."""

from __future__ import annotations

from typing import Any

import pytest

from prism.config import Settings
from tests.factories import Factory
from tests.limits_support import client_for, limited_app
from tests.oauth_support import bearer, browser, tokens_for

ME = "/api/v1/dev/me/"


@pytest.mark.parametrize("cache_seconds", [0, 30], ids=["uncached", "cached"])
async def test_a_valid_key_on_another_tenants_host_is_refused_without_counting_as_a_guess(
        settings: Settings, app: Any, factory: Factory, cache_seconds: int) -> None:
    a, b = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    async with limited_app(settings, app, credential_cache_seconds=cache_seconds) as limited, \
            client_for(limited) as client:
        assert limited.state.settings.lockout_failures == 10
        assert (await client.get(ME, headers=a.headers())).status_code == 200  # cached now, when caching
        # Twelve, more than the lockout's ten, each way between the two tenants (and, with the ten guesses below,
        # under the `anonymous` tier's 30 a minute that refused credentials count in).
        for _ in range(6):
            for key_of, host_of in ((a, b), (b, a)):
                wrong = await client.get(ME, headers=key_of.headers(host=host_of.host))
                assert wrong.status_code == 401, wrong.text
                assert "invalid_token" in wrong.text and "another tenant" in wrong.text
        for ws in (a, b):  # each key still works on its own host
            right = await client.get(ME, headers=ws.headers())
            assert right.status_code == 200, right.text

        # A guess still counts: ten wrong secrets lock the address, its valid keys included.
        guess = {"Authorization": f"Bearer ck_{'x' * 40}", "Host": a.host}
        assert [(await client.get(ME, headers=guess)).status_code for _ in range(10)] == [401] * 10
        locked = await client.get(ME, headers=a.headers())
        assert locked.status_code == 429 and "too_many_failed_attempts" in locked.text, locked.text


async def test_an_access_token_on_another_tenants_host_is_refused_without_counting_as_a_guess(
        settings: Settings, app: Any, factory: Factory) -> None:
    """An access token Prism signed for one tenant's host, presented on another's: refused (401 invalid_token),
    not a guess (its signature verified)."""
    a, b = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    async with limited_app(settings, app) as limited, client_for(limited) as client:
        async with browser(limited, a.host) as c:
            token = (await tokens_for(c, a))["access_token"]
        for _ in range(12):  # more than the lockout's ten
            wrong = await client.get(ME, headers={**bearer(token), "Host": b.host})
            assert wrong.status_code == 401 and "invalid_token" in wrong.text, wrong.text
            assert "another host" in wrong.text
        right = await client.get(ME, headers={**bearer(token), "Host": a.host})
        assert right.status_code == 200, right.text
