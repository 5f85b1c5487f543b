"""Persona policy: allow / deny / oversight patterns over coordinates, compiled once per persona version.

A pattern has the four segments of a coordinate, `mega_tool/app/entity/operation`; a segment is a name,
`*` (any one segment) or a name with `*` wildcards inside (`agingAp*`). Each list compiles into ONE regular
expression, so matching a call costs one `re.match` per list however many patterns a persona holds.

Evaluation: a deny match blocks (deny wins over everything); then an oversight match escalates to a
human; then an allow match allows; no match falls back to the persona's default. A handler whose
declared cost exceeds the persona's per-call cost cap is blocked. A persona that requires a mission has the
gate refuse a call that names none, after these refusals and before oversight (gate.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from prism.governance.models import Persona
from prism.registry.mega_tools import MEGA_TOOLS, NAME_PATTERN, OPERATION_PATTERN

Effect = Literal["allow", "deny", "oversight"]
_SEGMENT = re.compile(r"^(\*|[A-Za-z0-9_*]{1,64})\Z")
MAX_PATTERNS = 200


def validate_pattern(pattern: str) -> str:
    """The pattern, or ValueError saying what a pattern must look like, or why it can never match a handler."""
    parts = pattern.split("/") if isinstance(pattern, str) else []
    if len(parts) != 4 or not all(_SEGMENT.match(p) for p in parts):
        raise ValueError(f"{pattern!r} is not a coordinate pattern: four segments mega_tool/app/entity/operation, "
                         "each a name or '*' (e.g. */*/*/delete)")
    problem = _never_matches(*parts)
    if problem is not None:
        # Matching is exact, so such a pattern would be kept and silently match nothing: a deny that denies nothing.
        raise ValueError(f"{pattern!r} can never match a handler: {problem}")
    return pattern


def _never_matches(mega_tool: str, app: str, entity: str, operation: str) -> str | None:
    """Why no handler's coordinate can match these segments, or None. Mega-tools are a fixed set; app and entity
    names are lower case (NAME_PATTERN); operation names are lowerCamelCase and matched as written."""
    if not any(re.fullmatch(_segment_regex(mega_tool), name) for name in MEGA_TOOLS):
        return f"{mega_tool!r} is no mega-tool (one of {', '.join(MEGA_TOOLS)})"
    for level, segment in (("app", app), ("entity", entity)):
        if segment != segment.lower():
            return f"{level} {segment!r} has capital letters; {level} names are lower case ({segment.lower()!r})"
        if "*" not in segment and not NAME_PATTERN.match(segment):
            return f"{level} {segment!r} is not a name: a lower-case letter, then letters, digits and _, 40 at most"
    if "*" not in operation and not OPERATION_PATTERN.match(operation):
        return f"operation {operation!r} is not a name: a letter, then letters, digits and _, 64 at most"
    return None


def _segment_regex(segment: str) -> str:
    """A segment's regex, matched in time linear in the coordinate's length. `a*b*c` as `[^/]*` pieces backtracks
    through every split of the name (a few dozen stars froze the process); instead each piece between two stars
    is found at its earliest place and never revisited (an atomic group), which is how a glob is matched in
    linear time, and finds a match whenever there is one."""
    segment = re.sub(r"\*+", "*", segment)
    if segment == "*":
        return "[^/]+"
    pieces = [re.escape(p) for p in segment.split("*")]
    if len(pieces) == 1:
        return pieces[0]
    first, *middle, last = pieces
    return first + "".join(f"(?>[^/]*?{piece})" for piece in middle) + "[^/]*" + last


def compile_patterns(patterns: list[str]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    alternatives = ("/".join(_segment_regex(s) for s in p.split("/")) for p in patterns)
    return re.compile("(?:" + "|".join(alternatives) + r")\Z")


@dataclass(frozen=True, slots=True)
class Verdict:
    effect: Effect
    reason: str
    rule: str  # which list decided: deny | oversight | allow | default | cost_cap (the gate adds require_mission)


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    persona_id: str
    version: int
    name: str
    allow: re.Pattern[str] | None
    deny: re.Pattern[str] | None
    oversight: re.Pattern[str] | None
    default: Literal["allow", "deny"]
    cost_cap: int | None
    oversight_priority: str
    oversight_sla_seconds: int
    require_mission: bool = False

    def evaluate(self, coordinate: str, cost: int) -> Verdict:
        if self.deny is not None and self.deny.match(coordinate):
            return Verdict("deny", f"persona {self.name!r} denies {coordinate}", "deny")
        if self.cost_cap is not None and cost > self.cost_cap:
            return Verdict("deny", f"{coordinate} costs {cost}, over persona {self.name!r}'s per-call cap of "
                                   f"{self.cost_cap}", "cost_cap")
        if self.oversight is not None and self.oversight.match(coordinate):
            return Verdict("oversight", f"persona {self.name!r} requires human approval for {coordinate}",
                           "oversight")
        if self.allow is not None and self.allow.match(coordinate):
            return Verdict("allow", f"persona {self.name!r} allows {coordinate}", "allow")
        if self.default == "allow":
            return Verdict("allow", f"persona {self.name!r} allows by default", "default")
        return Verdict("deny", f"persona {self.name!r} allows nothing that matches {coordinate} "
                               "(default deny)", "default")


_COMPILED: dict[tuple[Any, ...], CompiledPolicy] = {}


def compiled(persona: Persona | Any) -> CompiledPolicy:
    """The persona's matcher (from a row or an object), compiled on first use of each version of its rules.

    Kept under the rules themselves, not only the persona's id and version: a call in the same transaction as a
    change reads the changed row before it commits, and if that transaction is then rolled back, the next change
    commits the same version number with other rules; by version alone, this process would go on with the rules
    that never committed."""
    key = (persona.id, persona.version, persona.name, tuple(persona.allow), tuple(persona.deny),
           tuple(persona.oversight), persona.default_effect, persona.cost_cap, persona.oversight_priority,
           persona.oversight_sla_seconds, bool(persona.require_mission))
    policy = _COMPILED.get(key)
    if policy is None:
        if len(_COMPILED) > 10_000:  # old versions are never asked for again; keep memory bounded
            _COMPILED.clear()
        policy = _COMPILED[key] = CompiledPolicy(
            persona_id=persona.id, version=persona.version, name=persona.name,
            allow=compile_patterns(list(persona.allow)), deny=compile_patterns(list(persona.deny)),
            oversight=compile_patterns(list(persona.oversight)),
            default="allow" if persona.default_effect == "allow" else "deny", cost_cap=persona.cost_cap,
            oversight_priority=persona.oversight_priority, oversight_sla_seconds=persona.oversight_sla_seconds,
            require_mission=bool(persona.require_mission))
    return policy
