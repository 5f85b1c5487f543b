"""A forged X-Governance-Signature is a WebhookSignatureError, never another exception: a receiver that catches
the documented error answers 400 to a forger, not a 500."""

from __future__ import annotations

import time

import pytest
from prism_client.errors import WebhookSignatureError
from prism_client.webhooks import sign, verify_signature

SECRET = "whk_secret_" + "b" * 40
BODY = b'{"event_id":"dec_1"}'


@pytest.mark.parametrize("header", [
    "t=\u00b2,v1=ab",  # a Unicode digit: str.isdigit() says yes, int() says no
    "t=\u0661\u0662,v1=ab",  # Arabic-Indic digits
    "t=" + "9" * 5000 + ",v1=ab",  # past int()'s 4,300 digits
    "t=" + "9" * 400 + ",v1=ab",  # an int no float holds, for the tolerance check
])
def test_a_timestamp_that_is_not_plain_digits_is_a_malformed_header(header: str) -> None:
    with pytest.raises(WebhookSignatureError, match="malformed"):
        verify_signature(BODY, header, SECRET)


@pytest.mark.parametrize("signature", ["\u00e9", "\u00e9" * 64, "\ud800"])
def test_a_signature_that_is_not_ascii_is_refused(signature: str) -> None:
    with pytest.raises(WebhookSignatureError):
        verify_signature(BODY, f"t={int(time.time())},v1={signature}", SECRET)


def test_a_genuine_signature_beside_a_forged_one_still_verifies() -> None:
    """While a secret rotates Prism sends two v1= values; a receiver must not fail on a junk one beside them."""
    verify_signature(BODY, sign(BODY, SECRET) + ",v1=\u00e9", SECRET)
