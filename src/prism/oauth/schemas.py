"""Wire shapes of the authorization server: client registration (RFC 7591) and redirect URI rules."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult

import orjson

from prism.kit.urls import split_url
from prism.mcp_server.surfaces import SURFACES
from prism.oauth.errors import OAuthError
from prism.registry.mega_tools import PLATFORM_SCOPES

OOB_REDIRECT = "urn:ietf:wg:oauth:2.0:oob"
GRANT_TYPES = ("authorization_code", "refresh_token")
# A confidential client's secret is accepted in the form or in Basic whichever it registered (RFC 6749 2.3.1).
SECRET_METHODS = ("client_secret_post", "client_secret_basic")
AUTH_METHODS = ("none", *SECRET_METHODS)
# What the discovery documents publish: SPEC.md's fixed list. A registration asking for client_secret_basic is still
# accepted (clients that do not read the metadata send it), and such a client authenticates with Basic.
PUBLISHED_AUTH_METHODS = ("none", "client_secret_post")
FORBIDDEN_SCHEMES = frozenset({"javascript", "data", "file", "vbscript", "about", "blob", "filesystem", "ftp",
                               "ws", "wss", "mailto", "tel"})
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*\Z")
CLIENT_ID = re.compile(r"^[A-Za-z0-9._:~-]{3,128}\Z")
APP_SCOPE = re.compile(r"^[a-z][a-z0-9_]*\.(view|add|change|delete)(_[a-z][a-z0-9_]*)?\Z")
ADVERTISED_APP_SCOPES = ("spare_parts.view", "spare_parts.add", "spare_parts.change", "spare_parts.delete")
DEFAULT_SCOPE = " ".join(PLATFORM_SCOPES)
# Asking for it gets a refresh token the client may use, whatever grant types it registered (Prism issues a refresh
# token with every access token).
OFFLINE_ACCESS = "offline_access"
IGNORED_SCOPES = frozenset({"openid", "profile", "email", "address", "phone"})
MAX_REDIRECT_URIS = 20
MAX_URI_LENGTH = 2000
# Registered fields echoed back verbatim (strings only); anything else sent is tolerated and ignored.
ECHOED_FIELDS = ("client_uri", "logo_uri", "tos_uri", "policy_uri", "software_id", "software_version",
                 "contacts")
LINK_FIELDS = ("client_uri", "logo_uri", "tos_uri", "policy_uri")
# Prism's own registration metadata: the MCP tool surface the client's tokens get (docs/mcp.md), echoed back.
TOOL_SURFACE_FIELD = "prism_tool_surface"


def invalid_metadata(message: str) -> OAuthError:
    return OAuthError(message, code="invalid_client_metadata")


def invalid_redirect(message: str) -> OAuthError:
    return OAuthError(message, code="invalid_redirect_uri")


def is_loopback_host(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_redirect_uri(uri: Any) -> str:
    """https anywhere, http to loopback only (RFC 8252 7.3), private-use schemes (cursor://, vscode://), oob."""
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_LENGTH:
        raise invalid_redirect("each redirect_uri must be a non-empty string of at most 2000 characters")
    if uri == OOB_REDIRECT:
        return uri
    if any(c.isspace() for c in uri):
        raise invalid_redirect(f"redirect_uri {uri!r} contains whitespace")
    parts = split_url(uri)
    if parts is None:
        raise invalid_redirect(f"redirect_uri {uri!r} is not a valid URI")
    scheme = parts.scheme.lower()
    if not scheme or not SCHEME.match(scheme):
        raise invalid_redirect(f"redirect_uri {uri!r} is not an absolute URI")
    if scheme in FORBIDDEN_SCHEMES:
        raise invalid_redirect(f"redirect_uri scheme {scheme}: is not allowed")
    if parts.fragment or "#" in uri:
        raise invalid_redirect(f"redirect_uri {uri!r} must not contain a fragment")
    if scheme in ("http", "https"):
        if not parts.hostname:
            raise invalid_redirect(f"redirect_uri {uri!r} has no host")
        if parts.username or parts.password:
            raise invalid_redirect(f"redirect_uri {uri!r} must not carry credentials")
        if not _has_valid_port(parts):
            raise invalid_redirect(f"redirect_uri {uri!r} has a port that is not a number from 0 to 65535")
        if scheme == "http" and not is_loopback_host(parts.hostname):
            raise invalid_redirect(f"redirect_uri {uri!r}: plain http is allowed only to a loopback address; use https")
    return uri


def _has_valid_port(parts: SplitResult) -> bool:
    """Whether the URL's port, if any, is a port (urllib raises reading `:abc` or `:99999`)."""
    try:
        _ = parts.port
    except ValueError:
        return False
    return True


def check_link(name: str, value: str) -> None:
    """A link the consent page may show (logo, home page, terms, policy): https only, so no `javascript:` or
    `data:` URI and no plain-http tracking pixel reaches a person's browser."""
    parts = split_url(value)
    if parts is None or parts.scheme != "https" or not parts.hostname or parts.username or parts.password \
            or not _has_valid_port(parts) or any(c.isspace() for c in value) or len(value) > MAX_URI_LENGTH:
        raise invalid_metadata(f"{name} must be an https URL with a host (at most {MAX_URI_LENGTH} characters)")


def redirect_matches(registered: str, sent: str) -> bool:
    """Exact match, except that a loopback http redirect may use any port (RFC 8252 7.3) and any of the loopback
    forms (`127.0.0.1`, `[::1]`, `localhost`): a native client registers one and listens on another, and every
    one of them is the person's own machine. Only the authority may differ: what follows it must be the
    registered URI's, character for character (an empty path reads as `/`)."""
    if registered == sent:
        return True
    reg, got = split_url(registered), split_url(sent)
    if reg is None or got is None:  # a URI that cannot be parsed matches only itself
        return False
    if reg.scheme != "http" or got.scheme != "http" or not is_loopback_host(reg.hostname) \
            or not is_loopback_host(got.hostname) or got.username or got.password:
        return False
    if not _has_valid_port(got):  # a malformed port is no match
        return False
    after_sent = _after_authority(sent, got.netloc)
    return after_sent is not None and after_sent == _after_authority(registered, reg.netloc)


def _after_authority(uri: str, netloc: str) -> str | None:
    """The raw path, query and fragment of an http `uri` whose authority urlsplit read as `netloc`; None when the
    text does not literally start with `http://<netloc>`. urlsplit drops tabs and line breaks anywhere and
    control characters in front, so comparing its parts would take `/call<TAB>back` for `/callback`; the raw text
    is what the code would be sent to."""
    prefix = "http://" + netloc
    if uri[:len(prefix)].lower() != prefix.lower():
        return None
    rest = uri[len(prefix):]
    return rest if rest.startswith("/") else "/" + rest


def normalize_scope(scope: Any, *, field: str = "scope") -> str | None:
    """The scopes Prism grants of those asked, in order, once each: OpenID Connect's own scopes are ignored
    (Prism is not an OpenID provider, and generic clients ask for them out of habit), `offline_access` is kept;
    any other unknown scope is `invalid_scope`. None when nothing is left."""
    if scope is None or scope == "":
        return None
    if not isinstance(scope, str):
        raise invalid_metadata(f"{field} must be a space-separated string")
    wanted = [s for s in scope.split() if s not in IGNORED_SCOPES]
    unknown = [s for s in wanted if s not in PLATFORM_SCOPES and s != OFFLINE_ACCESS and not APP_SCOPE.match(s)]
    if unknown:
        raise OAuthError(f"unknown scopes {unknown}", code="invalid_scope")
    return " ".join(dict.fromkeys(wanted)) or None


def granted_scope(asked: str | None, fallback: str) -> str:
    """What an authorization grants: the scopes asked, or `fallback` (the client's registered scope, else the
    platform scopes) when they name no platform or app scope (`offline_access` alone grants nothing to do)."""
    scopes = (asked or "").split()
    if any(s != OFFLINE_ACCESS for s in scopes):
        return " ".join(scopes)
    return " ".join(dict.fromkeys([*fallback.split(), *scopes]))


def require_registered_scope(scope: str, registered: str | None) -> None:
    """A client's registered scope is the ceiling of what it gets (RFC 7591 section 2): a scope beyond it is
    `invalid_scope`. A client registered without one may get any scope Prism knows. Within the ceiling are its
    registered scopes, a model's scope of a registered `<app>.<verb>` (`spare_parts.view_spare_part` under
    `spare_parts.view`), any per-app scope when all three platform scopes are registered (together they allow
    every handler a per-app scope could), and `offline_access`, which lets a client refresh but allows no
    handler."""
    beyond = scopes_beyond(scope, registered)
    if beyond:
        raise OAuthError(f"scopes {beyond} are beyond the scope this client registered ({registered})",
                         code="invalid_scope")


def scopes_beyond(scope: str, registered: str | None) -> list[str]:
    """The scopes of `scope` outside the ceiling `registered` sets (none without one)."""
    if registered is None:
        return []
    ceiling = frozenset(registered.split())
    return [s for s in scope.split() if not _within(s, ceiling)]


def _within(scope: str, ceiling: frozenset[str]) -> bool:
    if scope == OFFLINE_ACCESS or scope in ceiling:
        return True
    if not APP_SCOPE.match(scope):
        return False
    app, _, rest = scope.partition(".")
    return f"{app}.{rest.split('_', 1)[0]}" in ceiling or ceiling >= frozenset(PLATFORM_SCOPES)


@dataclass(frozen=True)
class ClientRegistration:
    client_id: str | None
    client_name: str
    redirect_uris: list[str]
    grant_types: list[str]
    response_types: list[str]
    token_endpoint_auth_method: str
    scope: str | None
    extra: dict[str, Any]

    @property
    def fingerprint(self) -> str:
        key: list[Any] = [self.client_name, sorted(self.redirect_uris), sorted(self.grant_types),
                          self.token_endpoint_auth_method, self.scope]
        if TOOL_SURFACE_FIELD in self.extra:  # only when chosen: the fingerprints of other clients stay as they were
            key.append(self.extra[TOOL_SURFACE_FIELD])
        return hashlib.sha256(orjson.dumps(key)).hexdigest()


def _string_list(body: dict[str, Any], field: str, default: list[str]) -> list[str]:
    value = body.get(field)
    if value is None:
        return list(default)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid_metadata(f"{field} must be an array of strings")
    return list(dict.fromkeys(value))


def parse_registration(body: dict[str, Any]) -> ClientRegistration:
    uris = body.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        raise invalid_redirect("redirect_uris is required: a non-empty array of URIs")
    if len(uris) > MAX_REDIRECT_URIS:
        raise invalid_redirect(f"at most {MAX_REDIRECT_URIS} redirect_uris")
    redirect_uris = list(dict.fromkeys(check_redirect_uri(u) for u in uris))
    grant_types = _string_list(body, "grant_types", ["authorization_code"])
    unsupported = [g for g in grant_types if g not in GRANT_TYPES]
    if unsupported or "authorization_code" not in grant_types:
        raise invalid_metadata(f"grant_types must include authorization_code and may add refresh_token; "
                               f"unsupported: {unsupported}")
    response_types = _string_list(body, "response_types", ["code"])
    if response_types != ["code"]:
        raise invalid_metadata("response_types must be [\"code\"]")
    method = body.get("token_endpoint_auth_method", "none")
    if method not in AUTH_METHODS:
        raise invalid_metadata(f"token_endpoint_auth_method must be one of {', '.join(AUTH_METHODS)}")
    name = body.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > 255):
        raise invalid_metadata("client_name must be a string of at most 255 characters")
    client_id = body.get("client_id")
    if client_id is not None and (not isinstance(client_id, str) or not CLIENT_ID.match(client_id)):
        raise invalid_metadata("client_id must be 3-128 characters of letters, digits and . _ : ~ -")
    try:
        scope = normalize_scope(body.get("scope"))
    except OAuthError as exc:
        raise invalid_metadata(exc.message) from None
    contacts = body.get("contacts")  # RFC 7591 2: an array of strings (e-mail addresses), echoed as sent
    if contacts is not None and (not isinstance(contacts, list) or not all(isinstance(c, str) for c in contacts)):
        raise invalid_metadata("contacts must be an array of strings")
    extra = {k: body[k] for k in ECHOED_FIELDS
             if isinstance(body.get(k), str) or (k == "contacts" and isinstance(body.get(k), list))}
    for link in LINK_FIELDS:
        if link in extra:
            check_link(link, extra[link])
    surface = body.get(TOOL_SURFACE_FIELD)
    if surface is not None:
        if surface not in SURFACES:
            raise invalid_metadata(f"{TOOL_SURFACE_FIELD} must be one of {', '.join(SURFACES)}")
        extra[TOOL_SURFACE_FIELD] = surface
    return ClientRegistration(client_id=client_id, client_name=(name or "").strip() or "OAuth client",
                              redirect_uris=redirect_uris, grant_types=grant_types, response_types=response_types,
                              token_endpoint_auth_method=method, scope=scope, extra=extra)
