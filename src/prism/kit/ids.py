from __future__ import annotations

import secrets
import string
import uuid

_ALPHABET = string.ascii_letters + string.digits
# A mission's id (a UUID) and an oversight request's (`ovr_` and 32 hex digits) are this long, and so are the
# columns that keep them: a longer value names neither.
GOVERNANCE_ID_LENGTH = 36


def new_id() -> str:
    return str(uuid.uuid4())


def random_token(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


# Organizations have one public id, SPEC's `org_<uuid hex>` (the form webhook events carry). Prism stores the
# UUID; every answer shows the public form, and every input takes either (docs/architecture.md "Ids").
ORGANIZATION_PREFIX = "org_"


def public_organization_id(organization_id: str) -> str:
    """`org_<hex>` of a stored organization id."""
    return ORGANIZATION_PREFIX + uuid.UUID(organization_id).hex


def stored_organization_id(value: str) -> str | None:
    """The stored (UUID) id an input names, `org_<hex>` or a UUID in any form `uuid` reads (hyphenated or 32 hex
    digits, either case, braces, `urn:uuid:`); None when it is neither."""
    text = value.strip()
    try:
        return str(uuid.UUID(text[len(ORGANIZATION_PREFIX):] if text.startswith(ORGANIZATION_PREFIX) else text))
    except ValueError:
        return None
