"""What an upstream answers has every form of the connection's credential withheld, also as JSON encoders write
it inside a string: an upstream echoing the request as JSON escapes `"` and `\\`, PHP's encoder `/`, Go's `<>&`,
Python's non-ASCII; a credential's raw bytes alone were withheld, so an escaped echo reached the caller."""

from __future__ import annotations

import base64
import json

import pytest

from prism.integrations.credentials import Credential, withheld

pytestmark = pytest.mark.engine_independent

SECRET = 'k3y/with"quote\\slash<&>é-and-more'


def _echoes(value: str) -> list[str]:
    python = json.dumps({"echo": value})
    return [python, json.dumps({"echo": value}, ensure_ascii=False), python.replace("/", "\\/"),
            python.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")]


@pytest.mark.parametrize("credential", [
    Credential("api_key", {"header": "X-Key"}, SECRET),
    Credential("basic", {"username": "svc"}, SECRET),
])
def test_a_credential_echoed_by_any_json_encoder_is_withheld(credential: Credential) -> None:
    pair = base64.b64encode(f"svc:{SECRET}".encode()).decode()
    values = [SECRET, pair] if credential.kind == "basic" else [SECRET]
    for value in values:
        for body in _echoes(value):
            shown = json.loads(withheld(body.encode(), credential=credential))["echo"]
            assert shown == "********", (body, shown)


def test_an_ordinary_answer_is_left_as_it_is() -> None:
    body = json.dumps({"items": [{"name": "bolt/nut", "note": 'a "quoted" <word>'}]}).encode()
    assert withheld(body, credential=Credential("api_key", {"header": "X-Key"}, SECRET)) == body
