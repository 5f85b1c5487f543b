"""Compiled persona policies are kept under their rules, not only the persona's id and version: a governed call in
the same ledger batch as a persona's change reads the changed row before it commits; should that batch be rolled
back, the next change commits the same version number with other rules, and a cache by version alone would keep
serving the rules that never committed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from prism.governance.policy import compiled


def _persona(**rules: Any) -> SimpleNamespace:
    values = {"id": "pers_cache_test", "version": 7, "name": "Agent", "allow": [], "deny": [], "oversight": [],
              "default_effect": "allow", "cost_cap": None, "oversight_priority": "normal",
              "oversight_sla_seconds": 3600, "require_mission": False, **rules}
    return SimpleNamespace(**values)


def test_the_same_version_with_other_rules_is_compiled_again() -> None:
    never_committed = compiled(_persona(deny=["entity_crud/spare_parts/*/*"]))
    committed = compiled(_persona(deny=["report_query/*/*/*"]))
    coordinate = "entity_crud/spare_parts/spare_part/list"
    assert never_committed.evaluate(coordinate, 1).effect == "deny"
    assert committed.evaluate(coordinate, 1).effect == "allow"
    assert compiled(_persona(deny=["report_query/*/*/*"])) is committed  # the same rules: compiled once
