"""401 answers point OAuth clients at the protected-resource metadata (RFC 9728 section 5.1).

A pure ASGI middleware: it looks only at the start of a response, and rewrites only 401s whose
`WWW-Authenticate` is a Bearer challenge, so every other response passes untouched.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from prism.oauth.issuer import issuer_for

METADATA_PATH = "/.well-known/oauth-protected-resource"


class ResourceMetadataChallenge:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_metadata(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                message["headers"] = _with_metadata(scope, message.get("headers", []))
            await send(message)

        await self.app(scope, receive, send_with_metadata)


def _with_metadata(scope: Scope, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    url = issuer_for(Request(scope)) + METADATA_PATH
    rewritten = []
    for name, value in headers:
        if name.lower() == b"www-authenticate" and value[:6].lower() == b"bearer" \
                and b"resource_metadata=" not in value:
            separator = b", " if value.strip().lower() != b"bearer" else b" "
            value = value + separator + f'resource_metadata="{url}"'.encode()
        rewritten.append((name, value))
    return rewritten
