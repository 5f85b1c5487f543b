"""The regular expressions of imported schemas: one engine for checking arguments and for reading descriptions.

Patterns run on jsonschema-rs: Rust's linear-time `regex` for every pattern it can run, fancy-regex for one that
needs backtracking (a lookaround, a backreference), stopped after `BACKTRACK_LIMIT` steps against one string.
"""

from __future__ import annotations

from functools import lru_cache

import jsonschema_rs

# Steps a backtracking pattern may take against one string before the check gives up on it (about 0.3 ms here;
# the call is then refused, saying so). A legitimate lookaround takes a few per character.
BACKTRACK_LIMIT = 10_000
PATTERNS = jsonschema_rs.FancyRegexOptions(backtrack_limit=BACKTRACK_LIMIT)


@lru_cache(maxsize=4096)
def runs(pattern: str) -> bool:
    """Whether the engine reads `pattern` (ECMA-262 syntax, mostly; a description's patterns repeat a lot)."""
    try:
        jsonschema_rs.Draft202012Validator({"pattern": pattern}, pattern_options=PATTERNS)
    except (jsonschema_rs.ValidationError, ValueError):
        return False
    return True
