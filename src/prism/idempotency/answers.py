"""What is stored of a call's answer, and what a replay hands the door.

The stored answer is the dispatcher's outcome — the handler's data, or the refusal (code, message, details)
with its status — not the bytes a door sent: the key's fingerprint names the door, so a replay is always
rendered by the same door from the same outcome, which gives the same status and body.

Answers are sealed with AES-GCM under a key derived from the master secret, bound to their row: a handler of
an installed app may return anything (an upstream system's token, a person's data), and the database keeps
none of it readable. The master secret changing makes old answers unreadable: a replay then answers 500.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from prism.config import Settings
from prism.errors import PrismError
from prism.idempotency.keys import REPLAYED_HEADER
from prism.kit.secret import Undecryptable, decrypt, derived_key, encrypt

REPLAYED_HEADERS = {REPLAYED_HEADER: "true"}


class ReplayedRefusal(PrismError):
    """The refusal the key's first call got, again; every HTTP door sends its headers with it."""

    headers = REPLAYED_HEADERS


@dataclass(frozen=True, slots=True)
class Replay:
    """The data of the key's first call, which succeeded; the door renders it as it did the first time."""

    data: Any


class AnswerUnreadable(PrismError):
    code, status = "idempotency_answer_unreadable", 500


def seal_data(settings: Settings, record_id: str, data: Any) -> str:
    """A successful call's data, sealed. Raises TypeError when the data is not JSON (the door could not send it)."""
    return _seal(settings, record_id, {"data": data})


def seal_refusal(settings: Settings, record_id: str, error: PrismError) -> str:
    return _seal(settings, record_id, {"error": error.code, "message": error.message, "details": error.details})


def open_answer(settings: Settings, record_id: str, status: int, sealed: str) -> Replay | ReplayedRefusal:
    try:
        answer = orjson.loads(decrypt(derived_key(settings, "idempotency-answers"), sealed, record_id))
    except Undecryptable:
        raise AnswerUnreadable("the stored answer of this Idempotency-Key cannot be read (the master secret "
                               "changed); send the request with a new key") from None
    if "data" in answer:
        return Replay(answer["data"])
    return ReplayedRefusal(answer["message"], code=answer["error"], status=status, details=answer["details"])


def _seal(settings: Settings, record_id: str, answer: dict[str, Any]) -> str:
    # The JSON the doors write (prism.web.responses.render_json): what a door can send, this can store.
    plain = orjson.dumps(answer, option=orjson.OPT_NON_STR_KEYS)
    return encrypt(derived_key(settings, "idempotency-answers"), plain, record_id)
