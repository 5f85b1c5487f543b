from __future__ import annotations

import secrets
import string
import uuid

_ALPHABET = string.ascii_letters + string.digits


def new_id() -> str:
    return str(uuid.uuid4())


def random_token(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))
