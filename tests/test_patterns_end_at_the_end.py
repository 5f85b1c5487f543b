"""Identifiers checked with a regular expression end where the text ends: Python's `$` also matches before a
final newline, so `name\n` passed every check that used it and was stored, shown and compared as another name
(a persona's deny pattern that never matched, an OAuth client id that looks like another, a header name)."""

from __future__ import annotations

import re

import pytest

from prism.governance.policy import validate_pattern
from prism.identity.service import EMAIL_PATTERN
from prism.integrations.credentials import HEADER_NAME as CREDENTIAL_HEADER
from prism.oauth.authorize import CHALLENGE
from prism.oauth.schemas import APP_SCOPE, CLIENT_ID, SCHEME
from prism.oauth.service import VERIFIER
from prism.registry.mega_tools import NAME_PATTERN, OPERATION_PATTERN, TOOL_NAME_PATTERN
from prism.tenancy.service import SUBDOMAIN_PATTERN
from prism.webhooks.schemas import _HEADER_NAME as WEBHOOK_HEADER

pytestmark = pytest.mark.engine_independent

CHECKED = [
    (CLIENT_ID, "my-client"), (CHALLENGE, "a" * 43), (VERIFIER, "v" * 43), (SCHEME, "myapp"),
    (APP_SCOPE, "finance.view_vendor"), (EMAIL_PATTERN, "ops@example.com"), (EMAIL_PATTERN, "ops@localhost"),
    (SUBDOMAIN_PATTERN, "acme"), (CREDENTIAL_HEADER, "X-Api-Key"), (WEBHOOK_HEADER, "X-Team"),
    (NAME_PATTERN, "spare_parts"), (OPERATION_PATTERN, "list"), (TOOL_NAME_PATTERN, "prism_entity_crud"),
]


@pytest.mark.parametrize(("pattern", "valid"), CHECKED, ids=[f"{p.pattern[:24]}" for p, _ in CHECKED])
def test_a_final_newline_is_not_part_of_a_valid_identifier(pattern: re.Pattern[str], valid: str) -> None:
    assert pattern.match(valid)
    assert not pattern.match(valid + "\n")


def test_a_persona_pattern_with_a_final_newline_is_refused() -> None:
    assert validate_pattern("entity_crud/finance/vendor/list") == "entity_crud/finance/vendor/list"
    with pytest.raises(ValueError, match="not a coordinate pattern"):
        validate_pattern("entity_crud/finance/vendor/list\n")
