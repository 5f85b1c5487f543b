"""Persona coordinate patterns are matched in time linear in the coordinate, whatever their wildcards."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import httpx
from sqlalchemy import select

from prism.governance.models import Persona
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import governed_key

# Valid by the documented grammar: four segments, each a name with `*` wildcards inside (at most 64 characters).
STARRY = "*/*/*/" + "*" * 63 + "Z"
COORDINATE = "report_query/finance/invoice/agingApSummary"  # SPEC's own example handler

_PROBE = """
import sys, time
from prism.governance.policy import CompiledPolicy, compile_patterns
policy = CompiledPolicy(persona_id="p", version=1, name="starry", allow=None, deny=compile_patterns([sys.argv[1]]),
                        oversight=None, default="allow", cost_cap=None, oversight_priority="normal",
                        oversight_sla_seconds=3600)
print(policy.evaluate(sys.argv[2], 1).effect)
"""


async def test_a_persona_pattern_accepted_by_the_api_is_matched_in_bounded_time(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """Every dispatch by a governed key evaluates the persona (Gate._persona_allows) on the event loop. A pattern the
    persona API accepts must not stall that evaluation: a tenant admin's persona would otherwise freeze the shared
    server for every tenant on each call its key makes."""
    ws = await factory.workspace(roles=("owner",))
    made: dict[str, Any] = await governed_key(factory, client, ws, "agent",
                                              persona={"name": "starry", "deny": [STARRY], "default": "allow"})
    async with db.read() as session:
        persona = (await session.execute(select(Persona).where(Persona.id == made["persona"]["id"]))).scalar_one()
    assert persona.deny == [STARRY]  # accepted and stored as given

    # What Gate does for each call of the agent key, run apart so that the suite is not stalled with it.
    try:
        done = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", _PROBE, STARRY, COORDINATE],
                                       capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"matching {COORDINATE} against the persona's deny pattern {STARRY!r} took over 15 s "
                             "(catastrophic regex backtracking)") from None
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "allow"
