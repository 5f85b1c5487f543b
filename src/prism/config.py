"""Settings, read once from the environment (prefix ``PRISM_``)."""

from __future__ import annotations

import ssl
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from prism.kit.networks import parse_networks

# Uvicorn's levels (PRISM_LOG_LEVEL sets Uvicorn's and Prism's loggers).
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def _default_database_url() -> str:
    # `prism serve` run in an empty directory keeps its SQLite file there.
    return f"sqlite:///{Path.cwd() / 'prism.db'}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PRISM_", extra="ignore")

    database_url: str = Field(default_factory=_default_database_url)
    # Connections one process keeps open to PostgreSQL, the extra ones it may open under load, and how long a
    # transaction waits for a free one before answering 503 database_unavailable. Every process (each
    # `prism serve` worker, `prism worker`) has its own pool: processes x (pool_size + max_overflow) must stay
    # below the server's max_connections (docs/architecture.md "Storage"). SQLite uses the same pool limits.
    database_pool_size: int = Field(default=10, ge=1)
    database_max_overflow: int = Field(default=5, ge=0)
    database_pool_timeout_seconds: float = Field(default=5.0, gt=0)
    # SQLite: how long a writer waits for another process's write lock before answering 503.
    database_busy_timeout_seconds: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    redis_url: str | None = None
    base_domain: str = "localhost"
    public_scheme: Literal["http", "https"] = "http"
    public_port: int | None = Field(default=None, ge=1, le=65535)
    # Hosts answered besides PRISM_BASE_DOMAIN, its subdomains and the loopback names (comma-separated names or
    # addresses, served as the platform host); any other Host is refused with 421 (docs/oauth.md "Hosts").
    extra_hosts: str = ""
    # Origins (`https://app.example.com`, comma-separated, or `*`) whose browser pages may call the MCP door,
    # besides the host's own origin; a request carrying any other Origin is refused with 403.
    mcp_allowed_origins: str = ""
    # Extra handler modules to load ("mypkg.handlers,other.mod"), on top of the `prism.apps` entry points.
    apps: str = ""
    # How long a verified API key is trusted from the in-process cache before it is looked up again.
    # A revocation (today made by the CLI, another process) takes effect within this window.
    credential_cache_seconds: float = 5.0
    # last_used_at is written at most this often per key, never once per request.
    key_touch_interval_seconds: float = 60.0
    # Seed the demo tenant on an empty database at `prism serve`. Unset: only on the embedded default (no
    # PRISM_DATABASE_URL, the SQLite file in the working directory), never on a server Prism was pointed at.
    seed_demo: bool | None = None
    # MCP door (docs/mcp.md): a session id is a token signed with a key derived from the master secret,
    # so any process of the deployment verifies it; it expires after this many seconds.
    mcp_session_ttl_seconds: int = Field(default=86400, ge=1)
    mcp_tools_page_size: int = Field(default=50, ge=1)
    # The tools MCP clients see: `mega`, the 13 prism_<mega_tool> doors; `split`, each door cut into _read,
    # _write and _destructive variants whose annotations hold for every operation behind them. A connection
    # may choose with `?tools=` on the MCP URL.
    mcp_tool_surface: Literal["mega", "split"] = "mega"
    # How often an idle legacy SSE stream sends a keep-alive comment (0 would send them without pause).
    mcp_sse_keepalive_seconds: float = Field(default=15.0, ge=0.1, allow_inf_nan=False)
    # With several processes (docs/mcp.md "Streams across processes and hosts"), the one connection a process listens
    # on for its legacy SSE streams must answer a round trip (Redis PING, a PostgreSQL query) this often, within the
    # timeout; one that does not has died silently (a network cut, a frozen peer) and is dropped, its streams ended.
    mcp_sse_relay_ping_seconds: float = Field(default=15.0, gt=0)
    mcp_sse_relay_ping_timeout_seconds: float = Field(default=5.0, gt=0)
    # Legacy SSE streams one credential may hold open in one process: each holds a task, a socket and, with Redis,
    # a subscription; a client that opens streams without end would otherwise exhaust them for every tenant.
    mcp_sse_max_streams_per_credential: int = Field(default=16, gt=0)
    # After SIGTERM, how long `prism serve` waits for open requests and streams (legacy SSE streams never end by
    # themselves) before it ends them and stops.
    shutdown_grace_seconds: int = Field(default=30, gt=0)
    # Webhooks (docs/webhooks.md). Private, loopback, link-local and metadata addresses are refused as
    # receivers unless this is true (tests, on-premise receivers); PRISM_WEBHOOK_CA_BUNDLE names extra CA
    # certificates (PEM) trusted for receivers on top of the system store.
    webhook_allow_private_networks: bool = False
    webhook_ca_bundle: str | None = None
    # `prism serve` runs one delivery worker in-process unless this is false (then run `prism worker`).
    webhook_worker_in_process: bool = True
    # Deliveries one worker sends at once, and how long a claim lasts at least before another worker may take
    # it over. Each claim's lease is also at least its webhook's timeout_seconds plus LEASE_MARGIN_SECONDS
    # (prism.webhooks.worker.lease_seconds), so no value here can end a claim while its send may still run.
    # None of these three may be 0: a worker with no slot never sends anything, and a poll of 0 s spins.
    webhook_worker_concurrency: int = Field(default=16, gt=0)
    webhook_lease_seconds: float = Field(default=90.0, gt=0)
    # An idle worker looks for due deliveries this often (deliveries from this process wake it at once).
    webhook_poll_seconds: float = Field(default=0.5, gt=0)
    # A receiver's Retry-After (429/503) is honoured up to this many seconds.
    webhook_retry_after_max_seconds: int = Field(default=3600, ge=0)
    # This many consecutive FAILED deliveries deactivate a webhook (0 = never).
    webhook_deactivate_after_failures: int = Field(default=10, ge=0)
    # Webhooks one organization may have, switched off or not (409 webhook_limit_reached past it): each event is
    # written once per subscribed webhook in the transaction of the call that caused it, reads included.
    webhooks_per_organization: int = Field(default=50, ge=1)
    # Imported integrations (docs/integrations.md): a process notices another process's import, re-import,
    # removal or connection change within this many seconds (its own at once). Outbound calls follow the
    # webhook settings above: private networks and the CA bundle.
    integrations_refresh_seconds: float = Field(default=2.0, gt=0)
    # An OpenAPI description imported through the API is compiled in a child process (prism.integrations.compiling):
    # stopped after this many seconds, its address space allowed to grow by this many MB beyond what it starts with
    # (GitHub's description as YAML takes about 7 s and 300 MB more on a small VM).
    integration_compile_seconds: float = Field(default=120.0, gt=0)
    integration_compile_memory_mb: int = Field(default=2048, ge=256)
    # Every process holds every organization's imported handlers, connected or not: one organization's imports and
    # upstream MCP servers together offer at most this many (the deployment's own, imported with the CLI, apart).
    integration_handlers_per_organization: int = Field(default=5000, ge=1)
    # The audit ledger (docs/audit.md): a checkpoint of each organization's signed tree is kept and sent as
    # `audit.checkpoint` at most this often while its log grows; every process looks for entries left
    # unsealed (a process that stopped between commit and seal), and for logs that grew after their last
    # checkpoint and then stopped (their head's checkpoint is kept and sent), this often.
    audit_checkpoint_interval_seconds: float = Field(default=60.0, gt=0)
    audit_seal_sweep_seconds: float = Field(default=1.0, gt=0)
    log_level: str = "info"
    # Master secret (PRISM_SECRET_KEY): signs browser session cookies and encrypts the OAuth signing keys
    # at rest. Unset, Prism keeps a generated one in PRISM_SECRET_KEY_FILE (mode 0600, default
    # ./prism-secret.key). Every process of one deployment must see the same secret.
    secret_key: str | None = None
    secret_key_file: str = Field(default_factory=lambda: str(Path.cwd() / "prism-secret.key"))
    # OAuth lifetimes (seconds): authorization code, access token, refresh token (30 days, idle: each
    # rotation starts it again).
    oauth_code_seconds: int = 120
    oauth_access_token_seconds: int = 3600
    oauth_refresh_token_seconds: int = 30 * 24 * 3600
    # A refresh token presented again by its client this soon after it was rotated answers the pair that
    # rotation issued (two tabs or workers refreshing at once) instead of revoking the grant; 0 turns it off.
    oauth_refresh_grace_seconds: float = Field(default=10.0, ge=0)
    # However often it is refreshed, a grant ends this many days after the user consented (docs/oauth.md).
    oauth_grant_max_age_days: float = Field(default=90, gt=0)
    # Browser login sessions (login and consent pages, dashboards) last this long.
    browser_session_seconds: int = 12 * 3600

    # Rate limits, requests per minute (SPEC.md "Limits"): anonymous and authentication endpoints per client
    # address, authenticated and admin (a role granting `admin.access`) per user, MCP per tenant. A benchmark
    # raises them; the limiter keeps running. Counters are per process unless PRISM_REDIS_URL is set.
    rate_limit_anonymous: int = Field(default=30, ge=1)
    rate_limit_authenticated: int = Field(default=300, ge=1)
    rate_limit_admin: int = Field(default=1000, ge=1)
    rate_limit_auth_endpoints: int = Field(default=200, ge=1)
    rate_limit_mcp: int = Field(default=600, ge=1)
    rate_limit_key_registration: int = Field(default=5, ge=1)
    # Changes to an organization's imported integrations (import, add an MCP server, remove) per minute: each makes
    # every process rebuild its registry and search index, work all organizations share (docs/limits.md).
    rate_limit_integration_changes: int = Field(default=10, ge=1)
    # Failed authentications: this many within the window block the client address for lockout_seconds.
    # Checked like the ceilings: 0 would leave no place for any secret to be checked in (every uncached key, a
    # valid one included, would wait and be refused 429), and a window or block of 0, negative or infinite counts
    # nothing or never ends.
    lockout_failures: int = Field(default=10, ge=1)
    lockout_window_seconds: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    lockout_seconds: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    # Password hashes (argon2, hundreds of ms of CPU each) checked at once, on threads of their own (0: one per CPU
    # core), and how many more may wait for one; beyond that a sign-in is answered 503 password_checks_busy at once
    # rather than queueing until every client times out (docs/limits.md "Password checks").
    password_check_threads: int = Field(default=0, ge=0)
    password_check_queue: int = Field(default=16, ge=0)
    # Peers whose X-Forwarded-For is believed (comma-separated IPs or networks); anyone else's is ignored.
    trusted_proxies: str = ""
    # Anonymous requests that start an OAuth connection (the OAuth endpoints, the MCP door without an accepted
    # credential) count per address in a window of their own, so a hosted connector whose many users share
    # one egress address is not throttled by the general anonymous ceiling (docs/limits.md).
    rate_limit_anonymous_discovery: int = Field(default=600, ge=1)
    # Redis unreachable (docs/limits.md "Redis unreachable"): `closed` refuses requests carrying a secret with
    # 503 rate_limit_unavailable, `open` lets every request pass uncounted.
    rate_limit_on_redis_failure: Literal["open", "closed"] = "closed"
    # `prism serve --workers N` (N > 1) without PRISM_REDIS_URL counts in each process, so every ceiling and the
    # lockout threshold is N times its setting; serve refuses that unless this says the operator accepts it.
    rate_limit_per_process: bool = False
    # /readyz: the oldest pending webhook delivery may be due this long before the queue counts as stalled.
    health_webhook_stall_seconds: float = Field(default=300.0, gt=0)

    # Observability (docs/operations.md "Metrics", "Logs"). GET /metrics answers a scrape that carries
    # `Authorization: Bearer <PRISM_METRICS_TOKEN>` or comes from an address in PRISM_METRICS_ALLOW (addresses or
    # networks, comma-separated; empty: none), and refuses anyone else with 403.
    metrics_token: SecretStr | None = None
    metrics_allow: str = "127.0.0.1,::1"
    # Traces: `otel` sends a span per request and per dispatch stage to the process's OpenTelemetry tracer provider
    # (the `prism[otel]` extra; docs/operations.md "Traces"). Process-wide, like the provider.
    tracing: Literal["off", "otel"] = "off"
    # Log lines on stdout: `json` (one object a line) or `text`; unset, JSON unless stdout is a terminal.
    log_format: Literal["json", "text"] | None = None
    # Set by `prism serve --workers N` for its worker processes: prometheus-client's own variable (no PRISM_ prefix).
    prometheus_multiproc_dir: str | None = Field(default=None, validation_alias="PROMETHEUS_MULTIPROC_DIR")

    @field_validator("webhook_ca_bundle")
    @classmethod
    def _ca_bundle(cls, path: str | None) -> str | None:
        if path:
            try:
                ssl.create_default_context(cafile=path)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"cannot load CA certificates from {path}: {exc}") from None
        return path

    @field_validator("metrics_allow", "trusted_proxies")
    @classmethod
    def _networks(cls, spec: str) -> str:
        parse_networks(spec)  # as the edge and /metrics read them
        return spec

    @field_validator("public_scheme", mode="before")
    @classmethod
    def _scheme(cls, scheme: object) -> object:
        return scheme.strip().lower() if isinstance(scheme, str) else scheme  # `HTTPS` is https

    @field_validator("log_level")
    @classmethod
    def _level(cls, level: str) -> str:
        if level.lower() not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return level.lower()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
