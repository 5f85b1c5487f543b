"""Which limits a path is counted in and whether the edge checks a Bearer credential on it (SPEC.md "Limits").

- /.well-known/* is exempt from the rate tiers and the lockout; the tenant descriptor there still takes an
  optional key, checked like any other.
- /api/mcp/oauth/authorize* is exempt from the rate tiers (a person signs in and consents there).
- Authentication endpoints (OAuth register/token/revoke, the login form, key registration) count per address
  in `auth_endpoints`, key registration also in `key_registration`; they take no Bearer credential.
- The API (dispatch doors, the sandbox, the MCP door, webhook management) takes a Bearer credential: an
  accepted one counts per user (per tenant on the MCP door), anything else per address in `anonymous`.
- Every other path (ping, the browser pages, unknown paths) never looks at a Bearer credential, so a request
  there counts per address in `anonymous`, whatever Authorization header it carries.
"""

from __future__ import annotations

from dataclasses import dataclass

MCP_PATH = "/api/mcp/sse"
KEY_REGISTRATION = "/api/mcp/api-keys/register"
_AUTH_ENDPOINTS = frozenset({"/api/mcp/oauth/register", "/api/mcp/oauth/token", "/api/mcp/oauth/revoke", "/login",
                             KEY_REGISTRATION})
_BEARER_PREFIXES = ("/api/mcp/tools/", "/prism/", "/api/v1/dev/", MCP_PATH, "/api/v1/risk-assessment/")
_NO_BEARER = frozenset({"/api/v1/dev/ping"})
_WELL_KNOWN = "/.well-known/"
_DESCRIPTOR = "/.well-known/openapi.json"
_AUTHORIZE = "/api/mcp/oauth/authorize"


@dataclass(frozen=True, slots=True)
class PathPolicy:
    # Address tiers every request of the path counts in, before its caller is known.
    address_tiers: tuple[str, ...]
    # Whether the edge checks the Bearer credential (and counts an accepted caller in its own tier).
    takes_bearer: bool
    # The tier an accepted caller counts in: per user ("user"), per tenant ("mcp"), or none.
    caller_tier: str | None
    # Whether the failed-authentication lockout applies.
    lockout: bool = True
    # The methods whose requests carry the credential (a CORS preflight never does; the MCP door answers other
    # methods than GET and POST before looking at the caller).
    credential_methods: frozenset[str] = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"})


_EXEMPT = PathPolicy((), takes_bearer=False, caller_tier=None, lockout=False)
_DESCRIPTOR_POLICY = PathPolicy((), takes_bearer=True, caller_tier=None)
_UNLIMITED = PathPolicy((), takes_bearer=False, caller_tier=None)
_AUTH = PathPolicy(("auth_endpoints",), takes_bearer=False, caller_tier=None)
_REGISTRATION = PathPolicy(("auth_endpoints", "key_registration"), takes_bearer=False, caller_tier=None)
_API = PathPolicy((), takes_bearer=True, caller_tier="user")
_MCP = PathPolicy((), takes_bearer=True, caller_tier="mcp", credential_methods=frozenset({"GET", "POST"}))
_ANONYMOUS = PathPolicy(("anonymous",), takes_bearer=False, caller_tier=None)


def policy_for(path: str) -> PathPolicy:
    if path.startswith(_WELL_KNOWN):
        return _DESCRIPTOR_POLICY if path.rstrip("/") == _DESCRIPTOR else _EXEMPT
    if path.startswith(_AUTHORIZE):
        return _UNLIMITED
    bare = path.rstrip("/")
    if bare in _AUTH_ENDPOINTS:
        return _REGISTRATION if bare == KEY_REGISTRATION else _AUTH
    if bare == MCP_PATH:
        return _MCP
    if path.startswith(_BEARER_PREFIXES) and bare not in _NO_BEARER:
        return _API
    return _ANONYMOUS
