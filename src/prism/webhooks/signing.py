"""Secrets, signatures and the sealing of secrets at rest.

Signature (SPEC.md "Delivery rules"): `X-Governance-Signature: t=<unix>,v1=<hex>` where v1 is the lower-case
hex HMAC-SHA256 keyed with the UTF-8 bytes of the whole `whk_secret_…` string over `<t>.<body>`, body being
the exact bytes sent. That is the scheme of Stripe's `WebhookSignature.verify_header`, so receivers can use it.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import orjson

from prism.config import Settings
from prism.kit.ids import random_token
from prism.kit.secret import Undecryptable, decrypt, derived_key, encrypt
from prism.webhooks.schemas import SECRET_PREFIX

SIGNATURE_HEADER = "X-Governance-Signature"
USER_AGENT = "Prism-Governance-Webhook/1.0"


def new_secret() -> str:
    return SECRET_PREFIX + random_token(40)


def signature_header(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def seal(settings: Settings, webhook_id: str, secret: str, headers: dict[str, str]) -> str:
    """Encrypt the secret and custom headers; the webhook id is bound in, so a sealed value cannot be
    copied onto another webhook."""
    plain = orjson.dumps({"secret": secret, "headers": headers})
    return encrypt(derived_key(settings, "webhook-secrets"), plain, webhook_id)


class SealBroken(RuntimeError):
    """The sealed value does not open with this deployment's master secret (it changed, or data was altered)."""


def unseal(settings: Settings, webhook_id: str, sealed: str) -> tuple[str, dict[str, str]]:
    try:
        plain = decrypt(derived_key(settings, "webhook-secrets"), sealed, webhook_id)
    except Undecryptable:
        raise SealBroken(f"webhook {webhook_id}: secret cannot be decrypted with this master secret") from None
    data: dict[str, Any] = orjson.loads(plain)
    return str(data["secret"]), dict(data["headers"])
