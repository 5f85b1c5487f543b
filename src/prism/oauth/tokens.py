"""Access tokens: RS256 JWTs (typ at+jwt, RFC 9068) signed by the key ring, verified with the algorithm pinned."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import jwt

from prism.errors import CredentialNoLongerValid, CredentialOfAnotherTenant, Unauthenticated
from prism.oauth.issuer import audiences_for
from prism.oauth.keys import KeyRing

ALGORITHM = "RS256"
TOKEN_TYPE = "at+jwt"  # noqa: S105 (the JWT typ, RFC 9068)
LEEWAY_SECONDS = 5


def hash_secret(value: str) -> str:
    """Codes, refresh tokens and client secrets are random and long: SHA-256 is the right hash for them."""
    return hashlib.sha256(value.encode()).hexdigest()


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class AccessClaims:
    issuer: str
    subject: str
    audience: str
    client_id: str
    scope: str
    organization_id: str | None
    grant_id: str
    jti: str
    expires_at: int


async def issue_access_token(ring: KeyRing, *, issuer: str, subject: str, audience: str, client_id: str,
                             scope: str, organization_id: str | None, grant_id: str, lifetime: int) -> str:
    kid, key = await ring.signer()
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": issuer, "sub": subject, "aud": audience, "client_id": client_id, "scope": scope,
        "org": organization_id, "iat": now, "nbf": now, "exp": now + lifetime, "jti": secrets.token_urlsafe(16),
        "sid": grant_id,
    }
    return jwt.encode(claims, key, algorithm=ALGORITHM, headers={"kid": kid, "typ": TOKEN_TYPE})


def _invalid(message: str) -> Unauthenticated:
    return Unauthenticated(message, code="invalid_token")


async def verify_access_token(ring: KeyRing, token: str, *, hostname: str, scheme: str,
                              verify_exp: bool = True) -> AccessClaims:
    """Signature (RS256 only, whatever the header says), kid, typ, issuer of this host, audience, expiry.

    `hostname` is the host the token was presented to: a token of another host (another tenant) fails.
    """
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise _invalid("malformed access token") from None
    if header.get("alg") != ALGORITHM:
        raise _invalid("access tokens are signed with RS256 only")
    typ = header.get("typ")  # the header is the sender's JSON: any type at all
    if not isinstance(typ, str) or typ.lower() not in (TOKEN_TYPE, "application/at+jwt"):
        raise _invalid("not an access token (typ must be at+jwt)")
    kid = header.get("kid")
    key = await ring.public_key(kid) if isinstance(kid, str) else None
    if key is None:
        raise _invalid("access token signed by an unknown key")
    try:
        claims = jwt.decode(token, key, algorithms=[ALGORITHM], leeway=LEEWAY_SECONDS,
                            options={"verify_aud": False, "verify_exp": verify_exp,
                                     "require": ["iss", "sub", "aud", "exp", "iat", "jti", "client_id", "sid"]})
    except jwt.ExpiredSignatureError:  # raised only once the signature has been verified: a token of ours
        raise CredentialNoLongerValid("access token expired") from None
    except jwt.PyJWTError as exc:
        raise _invalid(f"invalid access token: {exc}") from None
    issuer = claims["iss"]
    parts = urlsplit(issuer) if isinstance(issuer, str) else None
    if parts is None or parts.scheme != scheme or (parts.hostname or "") != hostname.strip("[]"):
        # Signed by us, so its holder guessed nothing: refused here without counting toward the lockout.
        raise CredentialOfAnotherTenant("access token issued for another host", code="invalid_token")
    audience = claims["aud"]
    if not isinstance(audience, str) or audience not in audiences_for(issuer):
        raise _invalid("access token is for another audience")
    org = claims.get("org")
    return AccessClaims(issuer=issuer, subject=str(claims["sub"]), audience=audience,
                        client_id=str(claims["client_id"]), scope=str(claims.get("scope", "")),
                        organization_id=org if isinstance(org, str) else None, grant_id=str(claims["sid"]),
                        jti=str(claims["jti"]), expires_at=int(claims["exp"]))
