"""Secrets, signatures and the sealing of secrets at rest.

Signature (SPEC.md "Delivery rules"): `X-Governance-Signature: t=<unix>,v1=<hex>` where v1 is the lower-case
hex HMAC-SHA256 keyed with the UTF-8 bytes of the whole `whk_secret_…` string over `<t>.<body>`, body being
the exact bytes sent. That is the scheme of Stripe's `WebhookSignature.verify_header`, so receivers can use it.

A rotation may keep the replaced secret signing for a while (`rotate_secret`'s `keep_previous_seconds`): until
then each delivery carries a second `v1=`, by the previous secret, as Stripe's header does while an endpoint's
rolled secret expires. A receiver checking either (Stripe's verifier accepts any `v1` that matches) keeps
working while its configuration moves to the new secret.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from prism.config import Settings
from prism.kit.ids import random_token
from prism.kit.secret import Undecryptable, decrypt, derived_key, encrypt
from prism.kit.timeutil import iso
from prism.webhooks.schemas import SECRET_PREFIX

SIGNATURE_HEADER = "X-Governance-Signature"
USER_AGENT = "Prism-Governance-Webhook/1.0"


def new_secret() -> str:
    return SECRET_PREFIX + random_token(40)


def signature_header(secrets: list[str], body: bytes, timestamp: int) -> str:
    """`t=<unix>,v1=<hex>`, one `v1` per secret (the current one first)."""
    if isinstance(secrets, str):  # a string is a sequence too: of one-letter secrets
        raise TypeError("signature_header takes a list of secrets")
    signed = str(timestamp).encode() + b"." + body
    return f"t={timestamp}," + ",".join(
        "v1=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest() for secret in secrets)


@dataclass(frozen=True, slots=True)
class Opened:
    """A webhook's sealed values: its signing secret, its custom headers, and the secret a rotation replaced,
    still signing until `previous_until`."""

    secret: str
    headers: dict[str, str]
    previous: str | None = None
    previous_until: datetime | None = None

    def signing_secrets(self, now: datetime) -> list[str]:
        kept = self.previous is not None and self.previous_until is not None and now < self.previous_until
        return [self.secret, self.previous] if kept and self.previous is not None else [self.secret]


def seal(settings: Settings, webhook_id: str, opened: Opened) -> str:
    """Encrypt the secret, the custom headers and a previous secret; the webhook id is bound in, so a sealed
    value cannot be copied onto another webhook."""
    data: dict[str, Any] = {"secret": opened.secret, "headers": opened.headers}
    if opened.previous is not None and opened.previous_until is not None:
        data["previous"] = {"secret": opened.previous, "until": iso(opened.previous_until)}
    return encrypt(derived_key(settings, "webhook-secrets"), orjson.dumps(data), webhook_id)


class SealBroken(RuntimeError):
    """The sealed value does not open with this deployment's master secret (it changed, or data was altered)."""


def unseal(settings: Settings, webhook_id: str, sealed: str) -> Opened:
    try:
        plain = decrypt(derived_key(settings, "webhook-secrets"), sealed, webhook_id)
    except Undecryptable:
        raise SealBroken(f"webhook {webhook_id}: secret cannot be decrypted with this master secret") from None
    data: dict[str, Any] = orjson.loads(plain)
    previous = data.get("previous")  # sealed before rotations kept one: none
    return Opened(str(data["secret"]), dict(data["headers"]),
                  previous["secret"] if previous else None,
                  datetime.fromisoformat(previous["until"]) if previous else None)
