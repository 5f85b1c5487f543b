"""One row per (credential, Idempotency-Key): the request it was first used for and the answer it got.

The row is written in the ledger transaction of the call it belongs to (prism.idempotency.ticket), so the
answer is stored together with the handler's writes and the audit entry, or not at all.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from prism.models.base import Base, UTCDateTime


class IdempotencyRecord(Base):
    __tablename__ = "idempotency_keys"

    # SHA-256 (hex) of the credential and the key: a fixed-width primary key, whatever the client's key looks like.
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # SHA-256 (hex) of the request the key was first used for (door, organization, coordinate, arguments).
    fingerprint: Mapped[str] = mapped_column(String(64))
    # The answer's HTTP status and body, sealed (AES-GCM under the master secret); both NULL while the call
    # that claimed the key is still finishing its work after its commit.
    status: Mapped[int | None] = mapped_column(Integer)
    answer: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
