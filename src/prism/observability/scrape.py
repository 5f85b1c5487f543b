"""GET /metrics: the Prometheus text exposition, for a scraper Prism trusts (docs/operations.md "Metrics").

With several worker processes every one of them keeps its values in PROMETHEUS_MULTIPROC_DIR and the scrape
adds them up; with one, the process's own registry answers. The webhook queue is measured when scraped, with
one query, so every worker reports the same queue.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterable
from datetime import datetime

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy import func, select
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from prism.config import Settings
from prism.edge.context import request_context
from prism.edge.doors import PLAIN, door_routes
from prism.edge.paths import METRICS_PATH
from prism.errors import PermissionDenied
from prism.kit.networks import ip_of, parse_networks
from prism.kit.timeutil import utcnow
from prism.storage import Database
from prism.webhooks.models import WebhookDelivery

log = logging.getLogger("prism.metrics")

WAITING = ("pending", "retrying")
NO_STORE = {"Cache-Control": "no-store"}


class MetricsAccess:
    def __init__(self, settings: Settings) -> None:
        token = settings.metrics_token.get_secret_value() if settings.metrics_token else ""
        self.expected = f"Bearer {token}".encode() if token else None
        self.networks = parse_networks(settings.metrics_allow)

    def allows(self, authorization: str | None, address: str) -> bool:
        if self.expected is not None and authorization is not None:
            # Compared in constant time: how much of a guessed token matched must not show in the timing.
            if hmac.compare_digest(authorization.encode(), self.expected):
                return True
        ip = ip_of(address)  # None for "unknown": no peer address
        return ip is not None and any(ip in network for network in self.networks)


class _Measured:
    """Series measured at scrape time, as a collector for one scrape's registry."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


async def webhook_queue(db: Database) -> list[Metric]:
    async with db.read() as session:
        depth, oldest = (await session.execute(
            select(func.count(), func.min(WebhookDelivery.created_at))
            .where(WebhookDelivery.status.in_(WAITING)))).one()
    age = (utcnow() - oldest).total_seconds() if isinstance(oldest, datetime) else 0.0
    return [GaugeMetricFamily("prism_webhook_queue_depth", "Webhook deliveries pending or waiting to retry.",
                              value=depth),
            GaugeMetricFamily("prism_webhook_oldest_pending_age_seconds",
                              "Age of the oldest delivery pending or waiting to retry (0 when none).", value=age)]


async def metrics_endpoint(request: Request) -> Response:
    access: MetricsAccess = request.app.state.metrics_access
    if not access.allows(request.headers.get("authorization"), request_context(request.scope).address):
        return PLAIN.response(PermissionDenied(
            "metrics are served to PRISM_METRICS_ALLOW addresses or with the PRISM_METRICS_TOKEN bearer token",
            code="forbidden"), request.scope)
    settings: Settings = request.app.state.settings
    if settings.prometheus_multiproc_dir:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=settings.prometheus_multiproc_dir)  # type: ignore[no-untyped-call]
    else:
        registry = REGISTRY
    measured = CollectorRegistry()
    try:
        queue = await webhook_queue(request.app.state.db)
    except Exception as exc:  # the database is out of reach: the process's own series still answer
        log.warning("metrics: the webhook queue could not be measured: %s", type(exc).__name__)
        queue = []
    measured.register(_Measured(queue))
    body = generate_latest(registry) + generate_latest(measured)
    return Response(body, 200, {**NO_STORE, "Content-Type": CONTENT_TYPE_LATEST})


def routes() -> list[BaseRoute]:
    return door_routes(METRICS_PATH, metrics_endpoint, ["GET"], PLAIN)
