"""Which limits a path is counted in and whether the edge checks a Bearer credential on it (SPEC.md "Limits").

- /.well-known/* is exempt from the rate tiers and the lockout; the tenant descriptor there still takes an
  optional key, checked like any other.
- /api/mcp/oauth/authorize* (and /authorize at the origin root) is exempt from the rate tiers (a person signs
  in and consents there).
- The console's static files (/console/static/*: its style sheet and script, the API reference's bundle) are
  exempt from the rate tiers: served from memory, public and cached, they would otherwise spend a reader's
  anonymous 30 per minute on a few page loads.
- /healthz, /readyz and /metrics are exempt from everything: an orchestrator probes them and Prometheus scrapes
  /metrics from one address, often (/metrics checks its own access: prism.observability.scrape).
- The OAuth endpoints (register, a client's registration, token, revoke, userinfo; /token and /register at the
  origin root alike) count per address in `anonymous_discovery`: every OAuth connection starts there, and a
  hosted connector's users share its egress address.
- The other authentication endpoints (the login form, key registration) count per address in
  `auth_endpoints`, key registration also in `key_registration`; they take no Bearer credential.
- The API (dispatch doors, the sandbox, the MCP door, webhook management) takes a Bearer credential: an
  accepted one counts per user (per tenant on the MCP door), anything else per address in `anonymous`
  (`anonymous_discovery` on the MCP door, whose anonymous 401 is the first step of every OAuth connection).
- Every other path (ping, the browser pages, unknown paths) never looks at a Bearer credential, so a request
  there counts per address in `anonymous`, whatever Authorization header it carries; unless it carries a
  signed-in browser session (the console's cookie, signature and age checked): then it counts per user in
  `authenticated`, so a reviewer's open pages and their polling do not share one address's 30 per minute.
"""

from __future__ import annotations

from dataclasses import dataclass

MCP_PATH = "/api/mcp/sse"
KEY_REGISTRATION = "/api/mcp/api-keys/register"
_AUTH_ENDPOINTS = frozenset({"/login", KEY_REGISTRATION})
OAUTH_REGISTRATION = "/api/mcp/oauth/register"
_OAUTH_CREDENTIAL_ENDPOINTS = frozenset({"/api/mcp/oauth/token", "/api/mcp/oauth/revoke", "/api/mcp/oauth/userinfo"})
HEALTH_PATHS = frozenset({"/healthz", "/readyz"})
METRICS_PATH = "/metrics"
_BEARER_PREFIXES = ("/api/mcp/tools/", "/prism/", "/api/v1/dev/", MCP_PATH, "/api/v1/risk-assessment/")
_NO_BEARER = frozenset({"/api/v1/dev/ping"})
_WELL_KNOWN = "/.well-known/"
_DESCRIPTOR = "/.well-known/openapi.json"
_AUTHORIZE = "/api/mcp/oauth/authorize"
_CONSOLE_STATIC = "/console/static/"
# The MCP 2025-03-26 fallback paths at the origin root (prism.oauth.routes): counted as the endpoints they alias.
ROOT_ALIASES = {"/authorize": _AUTHORIZE, "/token": "/api/mcp/oauth/token", "/register": OAUTH_REGISTRATION}


@dataclass(frozen=True, slots=True)
class PathPolicy:
    # Address tiers every request of the path counts in, before its caller is known.
    address_tiers: tuple[str, ...]
    # Whether the edge checks the Bearer credential (and counts an accepted caller in its own tier).
    takes_bearer: bool
    # The tier an accepted caller counts in: per user ("user"), per tenant ("mcp"), or none.
    caller_tier: str | None
    # The address tier a request counts in when the path takes a credential and none was accepted.
    anonymous_tier: str | None = None
    # Whether every request of the path carries a secret for the endpoint itself to check (a password, a client
    # secret, a token): with the limiter's storage unreachable and failing closed, such requests are refused.
    checks_secret: bool = False
    # Whether the failed-authentication lockout applies.
    lockout: bool = True
    # The methods whose requests carry the credential (a CORS preflight never does; the MCP door answers other
    # methods than GET and POST before looking at the caller).
    credential_methods: frozenset[str] = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"})
    # Whether a signed-in browser session counts per user in `authenticated` instead of the address tiers.
    counts_signed_in_reader: bool = False


_EXEMPT = PathPolicy((), takes_bearer=False, caller_tier=None, lockout=False)
_DESCRIPTOR_POLICY = PathPolicy((), takes_bearer=True, caller_tier=None)
_UNLIMITED = PathPolicy((), takes_bearer=False, caller_tier=None)
_AUTH = PathPolicy(("auth_endpoints",), takes_bearer=False, caller_tier=None, checks_secret=True)
_REGISTRATION = PathPolicy(("auth_endpoints", "key_registration"), takes_bearer=False, caller_tier=None,
                           checks_secret=True)
_OAUTH_REGISTRATION = PathPolicy(("anonymous_discovery",), takes_bearer=False, caller_tier=None)
_OAUTH_CREDENTIAL = PathPolicy(("anonymous_discovery",), takes_bearer=False, caller_tier=None, checks_secret=True)
_API = PathPolicy((), takes_bearer=True, caller_tier="user", anonymous_tier="anonymous")
_MCP = PathPolicy((), takes_bearer=True, caller_tier="mcp", anonymous_tier="anonymous_discovery",
                  credential_methods=frozenset({"GET", "POST"}))
_ANONYMOUS = PathPolicy(("anonymous",), takes_bearer=False, caller_tier=None, counts_signed_in_reader=True)


def host_exempt(path: str) -> bool:
    """Probes and scrapes address a process by its own address (a pod's IP), not by a name Prism serves: the
    health and metrics endpoints answer whatever the Host (they build no URL from it)."""
    bare = path.rstrip("/")
    return bare in HEALTH_PATHS or bare == METRICS_PATH


def policy_for(path: str) -> PathPolicy:
    path = ROOT_ALIASES.get(path.rstrip("/"), path)
    if path.startswith(_WELL_KNOWN):
        return _DESCRIPTOR_POLICY if path.rstrip("/") == _DESCRIPTOR else _EXEMPT
    if path.startswith((_AUTHORIZE, _CONSOLE_STATIC)):
        return _UNLIMITED
    bare = path.rstrip("/")
    if bare in HEALTH_PATHS or bare == METRICS_PATH:
        return _EXEMPT
    if bare in _OAUTH_CREDENTIAL_ENDPOINTS:
        return _OAUTH_CREDENTIAL
    if bare == OAUTH_REGISTRATION:
        return _OAUTH_REGISTRATION
    if bare.startswith(OAUTH_REGISTRATION + "/"):  # a client's registration (RFC 7592): a token to check
        return _OAUTH_CREDENTIAL
    if bare in _AUTH_ENDPOINTS:
        return _REGISTRATION if bare == KEY_REGISTRATION else _AUTH
    if bare == MCP_PATH:
        return _MCP
    if path.startswith(_BEARER_PREFIXES) and bare not in _NO_BEARER:
        return _API
    return _ANONYMOUS
