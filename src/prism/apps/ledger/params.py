"""Parameters of the ledger handlers: one set of filters for the list, the export and the console."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import Field, model_validator

from prism.apps.params import ListParams, Params
from prism.kit.numbers import SQL_BIGINT_MAX
from prism.kit.validation import Moment
from prism.ledger.keys import ENTRY_REF_LENGTH
from prism.ledger.queries import EntryFilter

Outcome = Literal["allowed", "refused", "replayed"]
MAX_EXPORT = 10_000


class EntryFilters(Params):
    since: Moment | None = Field(None, description="Entries at or after this time (ISO 8601 with zone).")
    until: Moment | None = Field(None, description="Entries before this time (ISO 8601 with zone).")
    actor: str | None = Field(None, min_length=1, max_length=320, description="The calling user: id or email.")
    credential_id: str | None = Field(None, min_length=1, max_length=64, description="API key or OAuth grant id.")
    persona_id: str | None = Field(None, min_length=1, max_length=64,
                                   description="Calls checked against this persona.")
    ai_system_id: str | None = Field(None, min_length=1, max_length=64,
                                     description="Calls of credentials tied to this AI system.")
    coordinate: str | None = Field(None, min_length=1, max_length=255,
                                   description="Exact coordinate, or a pattern with * (entity_crud/finance/*).")
    outcome: Outcome | None = Field(None, description="allowed, refused or replayed.")
    door: str | None = Field(None, min_length=1, max_length=32, description="canonical, sandbox, mcp, ...")
    # Positions are bound for SQL: one past the largest integer the database stores is refused, not sent.
    seq_from: int | None = Field(None, ge=1, le=SQL_BIGINT_MAX, description="From this position in the log "
                                 "(inclusive).")
    seq_to: int | None = Field(None, ge=1, le=SQL_BIGINT_MAX, description="Up to this position in the log "
                               "(inclusive).")

    @model_validator(mode="after")
    def _ranges(self) -> EntryFilters:
        if self.since is not None and self.until is not None and self.until <= self.since:
            raise ValueError("until must be after since")
        if self.seq_from is not None and self.seq_to is not None and self.seq_to < self.seq_from:
            raise ValueError("seq_to must not be below seq_from")
        return self

    def to_filter(self) -> EntryFilter:
        return EntryFilter(since=self.since, until=self.until, actor=self.actor, credential_id=self.credential_id,
                           persona_id=self.persona_id, ai_system_id=self.ai_system_id, coordinate=self.coordinate,
                           outcome=self.outcome, door=self.door, seq_from=self.seq_from, seq_to=self.seq_to)


class EntryList(ListParams, EntryFilters):
    def to_filter(self) -> EntryFilter:
        return replace(super().to_filter(), search=self.search)


class EntryRead(Params):
    id: str = Field(..., pattern=f"^[0-9a-fA-F]{{{ENTRY_REF_LENGTH}}}$",
                    description="The entry's id, as listed (list with seq_from = seq_to finds a position).")


class EntryExport(EntryFilters):
    format: Literal["jsonl", "csv"] = Field("jsonl", description="JSON Lines, or CSV with a header row.")
    limit: int = Field(MAX_EXPORT, ge=1, le=MAX_EXPORT,
                       description=f"At most this many entries (max {MAX_EXPORT}); next_seq_from continues.")


class LogVerify(Params):
    start: Literal["latest_checkpoint", "first_entry"] = Field(
        "latest_checkpoint", description="Check the entries after the newest kept signed checkpoint (quick), or "
                                         "the whole log from its first entry.")
