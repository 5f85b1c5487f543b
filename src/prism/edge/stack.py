"""The edge: one pure-ASGI middleware in front of every route, doors and pages alike.

For each HTTP request, in order: the client address, the host (one Prism serves) and a malformed request line,
the Bearer credential (on paths that take one: an attempt is reserved for an API key first, prism.edge.lockout,
so a burst of guesses has at most the lockout's threshold of them checked; an access token, which no guess can
produce, is counted after its check), then the failed-authentication lockout and the rate limit together, in one
step of the limiter that also frees the attempt: a locked-out address is refused the same way whatever its
credential was, and a failed credential is counted and checked against the lockout atomically. Last, a tenant
host that exists and on the MCP door the Origin (prism.edge.hosts). A request without a credential is counted
before anything reads the database: the tenant host's lookup comes after its count (a credential's check looks
the host up first, as a key of another tenant is 401 and a host with no tenant 404, not a failure).

An API key the authenticator's cache accepts without awaiting anything (`Authenticator.peek`) reserves no
attempt: its count checks the lockout and the attempts in flight in the same step (`RateLimiter.hit_known_secret`,
one Redis round trip), as a reservation freed at once would; while they fill the threshold the key takes the
reserving way and waits for a place. Any other credential (a miss, a guess, a token) is always reserved first.

What it learns goes into the request's `RequestContext`; it never answers by itself. A refusal is left in
`context.refusal` for the door the router picks, which renders it in its own shape (prism.edge.doors), so the
edge needs to know nothing of the doors' error shapes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from prism.edge.context import SCOPE_KEY, RequestContext
from prism.edge.hosts import HostPolicy
from prism.edge.lockout import SecretAttempt, locked_out, reserve_attempt
from prism.edge.paths import MCP_PATH, PathPolicy, host_exempt, policy_for
from prism.errors import CredentialNoLongerValid, PrismError, Unauthenticated
from prism.kit.nul import nul_refusal
from prism.observability.current import CURRENT_REQUEST
from prism.observability.exchange import Exchange
from prism.observability.request_id import request_id_of
from prism.observability.tracing import request_span
from prism.ratelimit.addresses import AddressResolver
from prism.ratelimit.headers import over_limit
from prism.ratelimit.limiter import RateLimiter
from prism.ratelimit.unavailable import LimiterUnavailable
from prism.ratelimit.verdict import Busy, Locked, Verdict
from prism.storage import unavailable_error
from prism.tenancy.hosts import classify_host
from prism.web.browser import signed_in_user_id

if TYPE_CHECKING:  # the authenticator is the app's, read per request: importing it here would be circular
    from prism.auth.authenticator import Authenticator
    from prism.auth.context import AuthContext

# Users whose role grants this permission (owner and admin: `*`; a custom role may name it) get the admin
# ceiling instead of the authenticated one.
ADMIN_PERMISSION = "admin.access"


class Edge:
    def __init__(self, app: ASGIApp, *, limiter: RateLimiter, addresses: AddressResolver, hosts: HostPolicy) -> None:
        self.app = app
        self.limiter = limiter
        self.addresses = addresses
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            started = time.perf_counter()
            context = scope[SCOPE_KEY] = await self.context_of(scope)
            exchange = Exchange(scope, context, send, started)  # the request id on the answer; the access line
            current = CURRENT_REQUEST.set(context)
            with request_span(scope["method"], scope["path"], context.headers) as span:  # tracing off: None
                try:
                    await self.app(scope, receive, exchange.answer)
                finally:
                    CURRENT_REQUEST.reset(current)
                    exchange.finish()
                    if span is not None:
                        span.set_attributes({"http.response.status_code": exchange.status or 500,
                                             "prism.request_id": context.request_id})
            return
        if scope["type"] == "lifespan":
            send = self._closing(send)
        await self.app(scope, receive, send)

    async def context_of(self, scope: Scope) -> RequestContext:
        headers = Headers(scope=scope)
        client = scope.get("client")
        # Every line: a client's own X-Forwarded-For line comes before the one its proxy appends (addresses.py).
        forwarded = headers.getlist("x-forwarded-for") if self.addresses.proxies else None
        address = self.addresses.resolve(client[0] if client else None, forwarded)
        context = RequestContext(headers, classify_host(headers.get("host", ""), self.hosts.base_domain), address,
                                 request_id=request_id_of(headers.get("x-request-id")))
        path = _route_path(scope)
        policy = policy_for(path)
        checked = not host_exempt(path)
        try:
            if checked:
                misdirected = self.hosts.host_refusal(context.host)
                if misdirected is not None:  # not counted: nothing about the request is read further
                    raise misdirected
            try:
                await self._admit(scope, context, policy)
            except LimiterUnavailable:
                if self.limiter.fails_closed and _carries_secret(scope, context, policy):
                    raise
                # failing open: the request goes on uncounted, and its host and origin are still checked
            if checked:  # counted first, so that these refusals report the window they were counted in
                await self._check_tenant_and_origin(scope, context, path)
        except PrismError as refusal:
            context.refusal = refusal
        except Exception as exc:  # the credential's lookup found the database busy: a 503 the door renders
            unavailable = unavailable_error(exc)
            if unavailable is None:
                raise
            context.refusal = unavailable
        return context

    async def _check_tenant_and_origin(self, scope: Scope, context: RequestContext, path: str) -> None:
        """A tenant subdomain with no tenant (404) and a foreign Origin on the MCP door (403) are refused before
        any door reads the host (prism.edge.hosts)."""
        if context.host.kind == "tenant":
            authenticator: Authenticator = scope["app"].state.authenticator
            await authenticator.require_tenant_host(context.host)
        if path.rstrip("/") == MCP_PATH:
            refused = self.hosts.origin_refusal(context.headers.get("origin"), context.headers.get("host", ""))
            if refused is not None:
                raise refused

    async def _admit(self, scope: Scope, context: RequestContext, policy: PathPolicy) -> None:
        malformed = nul_refusal(scope)
        if malformed is not None:
            raise malformed
        lock = context.address if policy.lockout else None
        if policy.counts_signed_in_reader:
            reader = signed_in_user_id(scope["app"].state.settings, context.headers.get("cookie"))
            if reader is not None:
                self._count(context, await self.limiter.hit("authenticated", reader, lock))
                return
        authorization = context.headers.get("authorization")
        if not policy.takes_bearer or scope["method"] not in policy.credential_methods or not authorization:
            # No credential to check: the address is counted (the lockout with it) before anything reads the
            # database, so a throttled or locked-out address naming a new tenant subdomain each time is refused
            # without a lookup of it (the tenant host is checked after the count, `_check_tenant_and_origin`). The
            # door answers a missing credential `authentication_required` (`RequestContext.caller`).
            await self._count_address(context, policy.address_tiers, lock, policy.anonymous_tier)
            return
        authenticator: Authenticator = scope["app"].state.authenticator
        if lock is None or not authenticator.presents_api_key(authorization):
            # Nothing reserved: no guess can succeed as an access token (a signature) or under another scheme,
            # however many are checked at once: counted after the check (a refused one as a failure), so a hosted
            # connector's users behind one egress address never take turns for places. Its tenant host is looked
            # up before that count (the check needs it): refusing a locked-out address first would cost these
            # requests a round trip more (docs/limits.md "Where the checks run").
            await self._authenticate(scope, context, policy, lock, None)
            return
        if await self._count_known_caller(scope, context, policy, lock):
            return
        # A credential is checked only once an attempt is reserved for it (prism.edge.lockout): a locked-out
        # address is refused here, before its credential is looked at.
        attempt = await reserve_attempt(self.limiter, lock)
        try:
            await self._authenticate(scope, context, policy, lock, attempt)
        finally:
            await attempt.abandon()  # settled by now unless something raised

    async def _count_known_caller(self, scope: Scope, context: RequestContext, policy: PathPolicy,
                                  lock: str) -> bool:
        """Count a caller whose API key the authenticator's cache accepts (`Authenticator.peek`) in one step of
        the limiter, with no attempt reserved: the lockout is checked, and so are the attempts in flight, as a
        reservation freed at once would be (`RateLimiter.hit_known_secret`), so the right key is honoured under
        the same condition as on the way below. False when the cache does not accept the credential (a miss, a
        guess, a token) or the attempts in flight fill the threshold: the credential then waits for a place and
        is checked like any other."""
        authenticator: Authenticator = scope["app"].state.authenticator
        auth = authenticator.peek(context.headers.get("authorization"), context.host)
        if auth is None:
            return False
        window = _caller_window(policy, auth)
        if window is None:  # no caller tier to count in: the lockout alone, checked on the way below
            return False
        context.auth = auth  # with the storage unreachable and failing open, the request goes on as this caller
        authenticator.record_use(auth)
        outcome = await self.limiter.hit_known_secret(*window, lock)
        if isinstance(outcome, Busy):
            context.auth = None
            return False
        self._count(context, outcome)
        return True

    async def _authenticate(self, scope: Scope, context: RequestContext, policy: PathPolicy, lock: str | None,
                            attempt: SecretAttempt | None) -> None:
        """Check the credential and count the request: the caller's tier when accepted, the address's otherwise.
        A guess settles `attempt` as a failure; any other outcome frees it in the same step as the count."""
        authenticator: Authenticator = scope["app"].state.authenticator
        try:
            context.auth = await authenticator.authenticate(context.headers.get("authorization"), context.host,
                                                            context.headers.get("x-organization-context"))
        except PrismError as exc:
            context.auth_error = exc
            if context.headers.get("authorization") and isinstance(exc, Unauthenticated) \
                    and not isinstance(exc, CredentialNoLongerValid):
                # A guess: counted, lockout checked (LockedOut once the address is locked).
                if attempt is not None:
                    await attempt.failed()
                else:  # nothing reserved (a path exempt from the lockout, a token): the guess still counts
                    outcome = await self.limiter.auth_failed(context.address)
                    if isinstance(outcome, Locked):
                        raise locked_out(context.address, outcome) from None
                lock = attempt = None
            await self._count_address(context, policy.address_tiers, lock, policy.anonymous_tier, attempt)
            return
        window = _caller_window(policy, context.auth)
        if window is None:
            await self._count_address(context, policy.address_tiers, lock, None, attempt)
        else:
            self._count(context, await self.limiter.hit(*window, lock, _name(attempt)), attempt)

    async def _count_address(self, context: RequestContext, tiers: tuple[str, ...], lock: str | None,
                             anonymous_tier: str | None, attempt: SecretAttempt | None = None) -> None:
        """Count the request in the address's tiers; the lockout is checked, and `attempt` freed, with the first."""
        if anonymous_tier is not None:
            tiers = (*tiers, anonymous_tier)
        for tier in tiers:
            self._count(context, await self.limiter.hit(tier, context.address, lock, _name(attempt)), attempt)
            lock = attempt = None
        if attempt is not None:  # no tier to count in: the lockout alone
            await attempt.succeeded()
        elif lock is not None:
            locked = await self.limiter.locked_out(lock)
            if locked is not None:
                raise locked_out(lock, locked)

    @staticmethod
    def _count(context: RequestContext, outcome: Verdict | Locked, attempt: SecretAttempt | None = None) -> None:
        if attempt is not None:  # the hit freed it
            attempt.settled = True
        if isinstance(outcome, Locked):
            raise locked_out(context.address, outcome)
        context.verdict = outcome
        if not outcome.allowed:
            raise over_limit(outcome)

    def _closing(self, send: Send) -> Send:
        async def closing_send(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                await self.limiter.close()
            await send(message)

        return closing_send


def _caller_window(policy: PathPolicy, auth: AuthContext) -> tuple[str, str] | None:
    """The tier and key an accepted caller counts in on the path: per tenant on the MCP door, per user (the admin
    ceiling for an admin) on the API; None where the path counts per address only."""
    if policy.caller_tier == "mcp":
        return "mcp", auth.tenant_id
    if policy.caller_tier == "user":
        return "admin" if auth.permissions.allows(ADMIN_PERMISSION) else "authenticated", auth.user_id
    return None


def _name(attempt: SecretAttempt | None) -> str | None:
    return None if attempt is None else attempt.name


def _carries_secret(scope: Scope, context: RequestContext, policy: PathPolicy) -> bool:
    """Whether answering this request would tell its sender something about a secret it sent."""
    if policy.checks_secret:
        return True
    return (policy.takes_bearer and scope["method"] in policy.credential_methods
            and context.headers.get("authorization") is not None)


def _route_path(scope: Scope) -> str:
    """The path the router matches: the request's path without the root path it is mounted under."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


