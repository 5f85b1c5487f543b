"""Webhook management decisions: create, change, list, delete, test events and resends.

Plain async functions, session and caller first; they never commit (the endpoint's transaction does).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.auth.context import AuthContext
from prism.config import Settings
from prism.errors import Conflict, InvalidArguments, PermissionDenied
from prism.events.catalog import GOVERNANCE_EVENT_TYPES, carries_oversight_events
from prism.events.outbox import emit
from prism.kit.outbound import OutboundUrlRefused, check_url
from prism.kit.paging import envelope
from prism.kit.secret import MASK
from prism.kit.timeutil import iso, utcnow
from prism.models import Organization, OutboxEvent
from prism.registry.mega_tools import SCOPE_OF_CLASS, scopes_allow
from prism.webhooks.matching import forget_active_webhooks, new_delivery_id, still_wanted, subscribes
from prism.webhooks.models import Webhook, WebhookDelivery
from prism.webhooks.repository import Deliveries, Webhooks, fail_unsent, paged
from prism.webhooks.schemas import (
    MAX_RETRIES,
    DeliveryQuery,
    WebhookCreate,
    WebhookQuery,
    WebhookUpdate,
)
from prism.webhooks.signal import wake_workers_after_commit
from prism.webhooks.signing import Opened, SealBroken, new_secret, seal, unseal

DEFAULT_RETRY_DELAY_SECONDS = 60
DEFAULT_TIMEOUT_SECONDS = 30
SCOPE_CLASS_FOR = {"view": "read", "add": "write", "change": "write", "delete": "write"}


def require(auth: AuthContext, verb: str) -> None:
    """Scope and the RBAC permission `governance.<verb>_webhook`, as the dispatcher checks every handler: the
    platform scope of the class (mcp:read, mcp:write), or an OAuth per-app scope naming the permission."""
    permission = f"governance.{verb}_webhook"
    if not scopes_allow(auth.scopes, SCOPE_CLASS_FOR[verb], permission):
        scope = SCOPE_OF_CLASS[SCOPE_CLASS_FOR[verb]]
        raise PermissionDenied(f"this credential lacks the {scope} scope (or governance.{verb})")
    if not auth.permissions.allows(permission):
        raise PermissionDenied(f"your role lacks the permission {permission}")


def refuse_governed_on_oversight_webhook(auth: AuthContext, *events: list[str]) -> None:
    """A governed credential (an agent's) may not create, change, rotate, test, resend or delete a webhook that
    carries an oversight event, as subscribed before or after the change: deleting, switching off or re-pointing
    the security team's receiver of decisions and ledger entries would blind the people watching the agent, and a
    subscription of its own would stream them to the agent. Refused as the persona and AI system changes are."""
    if auth.governed and any(carries_oversight_events(subscribed) for subscribed in events):
        raise PermissionDenied("this credential is governed by a persona or an AI system, so it cannot manage a "
                               "webhook that carries governance, audit or mission events; a person does (the "
                               "console, or a key without either)", code="governed_credential")


async def _writable(session: AsyncSession, auth: AuthContext, webhook_id: str) -> Webhook:
    """The webhook to change, locked (a concurrent change of its events is seen before this one is judged),
    and refused to a governed credential when it carries oversight events."""
    row = await Webhooks(session, auth.organization_id).get(webhook_id, for_update=True)
    refuse_governed_on_oversight_webhook(auth, list(row.events))
    return row


def webhook_read(row: Webhook) -> dict[str, Any]:
    """WebhookRead: never the secret; custom header values are shown masked (they often hold credentials)."""
    return {
        "id": row.id, "name": row.name, "description": row.description, "url": row.url,
        "events": list(row.events), "filters": dict(row.filters),
        "custom_headers": dict.fromkeys(row.header_names, MASK),
        "max_retries": row.max_retries, "retry_delay_seconds": row.retry_delay_seconds,
        "timeout_seconds": row.timeout_seconds, "is_active": row.is_active,
        "deactivated_reason": row.deactivated_reason,
        "created_at": iso(row.created_at), "updated_at": iso(row.updated_at),
    }


def next_attempt_at(row: WebhookDelivery, *, webhook_active: bool) -> datetime | None:
    """When a worker may next try the delivery, for every delivery that will still be sent; None otherwise.

    A worker claims a delivery once it is due and no live lease holds it, so that moment is the later of `due_at`
    and `claimed_until`: the first attempt's time for a PENDING delivery, the retry's for a RETRYING one, the
    later time of one held back behind a hanging receiver, and, while a worker is trying it, the end of that
    worker's lease (its outcome replaces it; a worker lost mid-attempt is replaced then). A time in the past
    means due now, waiting for a worker. None once SUCCESS or FAILED, and for a delivery of an inactive webhook
    (a test event's too): it is not sent but made FAILED when a worker reaches it."""
    if row.status not in ("pending", "retrying") or row.due_at is None:
        return None
    if not webhook_active:
        return None
    if row.claimed_until is not None and row.claimed_until > row.due_at:
        return row.claimed_until
    return row.due_at


def delivery_read(row: WebhookDelivery, *, webhook_active: bool) -> dict[str, Any]:
    return {
        "id": row.id, "webhook_id": row.webhook_id, "event_type": row.event_type, "event_id": row.event_id,
        "status": row.status, "response_status_code": row.response_status_code,
        "response_body": row.response_body, "error_message": row.error_message,
        "attempt_count": row.attempt_count, "created_at": iso(row.created_at),
        "delivered_at": iso(row.delivered_at),
        "next_retry_at": iso(next_attempt_at(row, webhook_active=webhook_active)),
        "is_test": row.is_test,
    }


# A receiver URL as `check_receiver_url` found it: the URL to save, why it is refused, or None when none was sent.
CheckedUrl = str | OutboundUrlRefused | None


async def check_receiver_url(settings: Settings, url: str | None) -> CheckedUrl:
    """The receiver URL checked (its host resolved, within the SSRF guard's time limit), or why it is refused.

    The handlers' `prepare`: it runs before the call's ledger transaction, which every call of the process may
    wait on, so a host whose DNS answers slowly holds only its own caller. The refusal is returned, not raised:
    the service raises it where it checked the URL before (after the caller's own refusals)."""
    if url is None:
        return None
    try:
        return await check_url(url, allow_private_networks=settings.webhook_allow_private_networks)
    except OutboundUrlRefused as exc:
        return exc


def _receiver_url(checked: CheckedUrl) -> str:
    if isinstance(checked, OutboundUrlRefused):
        raise InvalidArguments(checked.message, field="url")
    assert checked is not None, "check_receiver_url ran on the URL sent"
    return checked


async def refuse_past_webhook_limit(session: AsyncSession, settings: Settings, organization_id: str, *,
                                    reactivating: str | None = None) -> None:
    """409 `webhook_limit_reached` when the organization already has PRISM_WEBHOOKS_PER_ORGANIZATION webhooks (all
    of them, switched off or not, for a new one), or that many active ones besides `reactivating`, the webhook being
    switched back on (only possible once the limit was lowered). Every event is written once per subscribed webhook
    in the transaction of the call that caused it, so without a limit one organization's webhooks would multiply
    the cost of every call it makes, reads included.

    The organization's row is locked first (FOR NO KEY UPDATE), so that on PostgreSQL two concurrent creates take
    turns instead of both counting one below the limit; rows that reference the organization (FOR KEY SHARE, as
    foreign keys and the ledger take) do not wait on it. SQLite has one writer at a time anyway."""
    limit = settings.webhooks_per_organization
    await session.execute(select(Organization.id).where(Organization.id == organization_id)
                          .with_for_update(key_share=True))
    counted = select(func.count()).select_from(Webhook).where(Webhook.organization_id == organization_id)
    if reactivating is not None:
        counted = counted.where(Webhook.is_active.is_(True), Webhook.id != reactivating)
    if (await session.execute(counted)).scalar_one() < limit:
        return
    if reactivating is None:
        message = (f"this organization has {limit:,} webhooks, its limit: delete one it no longer needs to add "
                   "another (webhooks switched off count too)")
    else:
        message = (f"this organization has {limit:,} active webhooks, its limit: switch one off or delete it to "
                   "switch this one on")
    raise Conflict(message, code="webhook_limit_reached", details={"limit": limit})


async def create_webhook(session: AsyncSession, auth: AuthContext, settings: Settings, body: WebhookCreate,
                         checked_url: CheckedUrl) -> dict[str, Any]:
    """`checked_url`: `check_receiver_url(settings, body.url)`, awaited before the transaction."""
    require(auth, "add")
    refuse_governed_on_oversight_webhook(auth, body.events or [])
    url = _receiver_url(checked_url)
    await refuse_past_webhook_limit(session, settings, auth.organization_id)
    webhook_id = "whk_" + uuid.uuid4().hex
    secret = new_secret()
    headers = body.custom_headers or {}
    now = utcnow()
    row = Webhooks(session, auth.organization_id).add(
        id=webhook_id, tenant_id=auth.tenant_id, name=body.name, description=body.description or "", url=url,
        events=body.events or [], filters=body.filters or {}, header_names=list(headers),
        sealed=seal(settings, webhook_id, Opened(secret, headers)),
        max_retries=MAX_RETRIES if body.max_retries is None else body.max_retries,
        retry_delay_seconds=body.retry_delay_seconds or DEFAULT_RETRY_DELAY_SECONDS,
        timeout_seconds=body.timeout_seconds or DEFAULT_TIMEOUT_SECONDS, is_active=True,
        consecutive_failures=0, created_at=now, updated_at=now)
    await session.flush()
    forget_active_webhooks(session)
    return {**webhook_read(row), "secret": secret}


async def list_webhooks(session: AsyncSession, auth: AuthContext, query: WebhookQuery) -> dict[str, Any]:
    require(auth, "view")
    stmt = Webhooks(session, auth.organization_id).filtered(is_active=query.is_active, name=query.name)
    total, rows = await paged(session, stmt, [Webhook.created_at.desc(), Webhook.id.desc()],
                              page=query.page, page_size=query.page_size)
    return envelope([webhook_read(r) for r in rows], query.page, query.page_size, total)


async def get_webhook(session: AsyncSession, auth: AuthContext, webhook_id: str) -> dict[str, Any]:
    require(auth, "view")
    return webhook_read(await Webhooks(session, auth.organization_id).get(webhook_id))


_NOT_CLEARABLE = ("name", "url", "secret", "is_active", "max_retries", "retry_delay_seconds", "timeout_seconds")


async def update_webhook(session: AsyncSession, auth: AuthContext, settings: Settings, webhook_id: str,
                         body: WebhookUpdate, checked_url: CheckedUrl) -> dict[str, Any]:
    """`checked_url`: `check_receiver_url(settings, body.url)`, awaited before the transaction."""
    require(auth, "change")
    row = await _writable(session, auth, webhook_id)
    given = body.model_fields_set
    if "events" in given:
        refuse_governed_on_oversight_webhook(auth, body.events or [])
    # Sent null clears what can be empty (description, events, filters, custom headers); every other field sent
    # null is refused, all named at once, as on every update (docs/extending.md "Updates").
    problems = [{"field": field, "message": "cannot be cleared (null); send a value"} for field in _NOT_CLEARABLE
                if field in given and getattr(body, field) is None]
    if problems:
        raise InvalidArguments("; ".join(f"{p['field']}: {p['message']}" for p in problems),
                               details={"errors": problems})
    if body.name is not None:
        row.name = body.name
    if "description" in given:
        row.description = body.description or ""
    if body.url is not None:
        row.url = _receiver_url(checked_url)
    if "events" in given:
        row.events = body.events or []
    if "filters" in given:
        row.filters = body.filters or {}
    for field in ("max_retries", "retry_delay_seconds", "timeout_seconds"):
        if field in given:
            setattr(row, field, getattr(body, field))
    if "secret" in given or "custom_headers" in given:
        if body.secret is not None and "custom_headers" in given:  # both replaced: the old seal is not needed
            opened = Opened(body.secret, body.custom_headers or {})
        else:
            opened = _opened(settings, row)
            if body.secret is not None:  # a secret the person chose replaces every one signing now
                opened = Opened(body.secret, opened.headers)
            if "custom_headers" in given:
                opened = replace(opened, headers=body.custom_headers or {})
        row.sealed = seal(settings, row.id, opened)
        row.header_names = list(opened.headers)
    if body.is_active and not row.is_active:
        await refuse_past_webhook_limit(session, settings, auth.organization_id, reactivating=row.id)
    if body.is_active is not None:
        if row.is_active and not body.is_active:
            # The clock the workers' leases are on: PostgreSQL's own (hosts' clocks may differ), SQLite's process.
            now = utcnow() if session.get_bind().dialect.name == "sqlite" else func.now()
            await fail_unsent(session, row.id, now)
        row.is_active = body.is_active
        if body.is_active:  # switched back on by a person: the automatic deactivation is forgiven
            row.deactivated_reason = None
            row.consecutive_failures = 0
    row.updated_at = utcnow()
    await session.flush()
    forget_active_webhooks(session)
    return webhook_read(row)


async def rotate_secret(session: AsyncSession, auth: AuthContext, settings: Settings, webhook_id: str, *,
                        keep_previous_seconds: int = 0) -> dict[str, Any]:
    """A new signing secret made by Prism, sealed like the first; the answer is the only place it is shown. With
    `keep_previous_seconds`, the secret it replaces goes on signing beside it until then (prism.webhooks.signing);
    a secret kept from an earlier rotation stops now."""
    require(auth, "change")
    row = await _writable(session, auth, webhook_id)
    opened = _opened(settings, row)
    now = utcnow()
    until = now + timedelta(seconds=keep_previous_seconds) if keep_previous_seconds else None
    secret = new_secret()
    row.sealed = seal(settings, row.id, Opened(secret, opened.headers, opened.secret if until else None, until))
    row.updated_at = now
    await session.flush()
    forget_active_webhooks(session)
    return {**webhook_read(row), "secret": secret, "previous_secret_valid_until": iso(until)}


def _opened(settings: Settings, row: Webhook) -> Opened:
    """The webhook's sealed values, for a change that keeps some of them; a seal this deployment's master secret
    no longer opens (it changed) is a conflict the caller resolves by replacing both secret and headers."""
    try:
        return unseal(settings, row.id, row.sealed)
    except SealBroken:
        raise Conflict("this webhook's secret and custom headers no longer open with this deployment's master "
                       "secret (it changed): send both secret and custom_headers to replace them",
                       code="seal_broken") from None


async def delete_webhook(session: AsyncSession, auth: AuthContext, webhook_id: str) -> None:
    require(auth, "delete")
    row = await _writable(session, auth, webhook_id)
    # The database cascade removes the deliveries (and any delivery a worker holds finds its row gone).
    await session.execute(delete(Webhook).where(Webhook.id == row.id,
                                                Webhook.organization_id == auth.organization_id))
    forget_active_webhooks(session)


async def list_deliveries(session: AsyncSession, auth: AuthContext, webhook_id: str,
                          query: DeliveryQuery) -> dict[str, Any]:
    require(auth, "view")
    webhook = await Webhooks(session, auth.organization_id).get(webhook_id)
    stmt = Deliveries(session, auth.organization_id).filtered(webhook_id, status=query.status,
                                                              event_type=query.event_type)
    total, rows = await paged(session, stmt, [WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc()],
                              page=query.page, page_size=query.page_size)
    return envelope([delivery_read(r, webhook_active=webhook.is_active) for r in rows], query.page,
                    query.page_size, total)


async def get_delivery(session: AsyncSession, auth: AuthContext, webhook_id: str,
                       delivery_id: str) -> dict[str, Any]:
    require(auth, "view")
    webhook = await Webhooks(session, auth.organization_id).get(webhook_id)
    delivery = await Deliveries(session, auth.organization_id).of_webhook(webhook_id, delivery_id)
    return delivery_read(delivery, webhook_active=webhook.is_active)


def _pending(organization_id: str, webhook_id: str, event_id: str, event_type: str, *,
             is_test: bool) -> WebhookDelivery:
    now = utcnow()
    return WebhookDelivery(id=new_delivery_id(), organization_id=organization_id, webhook_id=webhook_id,
                           event_id=event_id, event_type=event_type, status="pending", attempt_count=0,
                           response_body="", is_test=is_test, due_at=now, created_at=now)


async def _payload_of(session: AsyncSession, event_id: str) -> str:
    return str((await session.execute(select(OutboxEvent.payload).where(OutboxEvent.id == event_id))).scalar_one())


def refuse_inactive(webhook: Webhook, to_do: str) -> None:
    """A test event or a resend to a switched-off webhook is refused rather than queued: SPEC.md says inactive
    webhooks never deliver, so the worker would only make it FAILED unsent. A state conflict, as a resend of an
    event the webhook no longer subscribes to is: switching it on is the caller's to do first."""
    if not webhook.is_active:
        raise Conflict("this webhook is inactive, and an inactive webhook never delivers, test events and resends "
                       f"included: switch it on (PATCH is_active true) to {to_do}", code="webhook_inactive")


async def send_test_event(session: AsyncSession, auth: AuthContext, webhook_id: str) -> dict[str, Any]:
    """A real event through the real pipeline (outbox, worker, signature), addressed to this webhook only.

    Not to a switched-off webhook (`refuse_inactive`): a test event is a delivery like any other, and a receiver
    taken out of service must not be reached by one."""
    require(auth, "change")
    row = await _writable(session, auth, webhook_id)
    refuse_inactive(row, "send one")
    event_type = row.events[0] if row.events else GOVERNANCE_EVENT_TYPES[1]
    event = await emit(session, organization_id=auth.organization_id, tenant_id=auth.tenant_id,
                       event_type=event_type, fan_out_to_webhooks=False,
                       data={"test": True, "webhook_id": row.id,
                             "message": "A test event sent from Prism to check this receiver."})
    delivery = _pending(auth.organization_id, row.id, event.id, event_type, is_test=True)
    session.add(delivery)
    await session.flush()
    wake_workers_after_commit(session)
    return delivery_read(delivery, webhook_active=row.is_active)


async def resend_delivery(session: AsyncSession, auth: AuthContext, webhook_id: str,
                          delivery_id: str) -> dict[str, Any]:
    """A new delivery of the same event (same bytes, a fresh signature); the original record stays.

    The event resent is judged as well as the webhook: a governed credential may not resend an oversight event
    (re-pointing a webhook narrowed to business events is its to do, and would otherwise bring it the decisions
    delivered there before), and nobody resends an event the webhook no longer subscribes to (it would reach a
    receiver its subscription now keeps it from). Nor is anything resent to a switched-off webhook
    (`refuse_inactive`): accepted, it would only fail when a worker reached it."""
    require(auth, "change")
    webhook = await _writable(session, auth, webhook_id)
    original = await Deliveries(session, auth.organization_id).of_webhook(webhook_id, delivery_id)
    if auth.governed and carries_oversight_events([original.event_type]):
        raise PermissionDenied("this credential is governed by a persona or an AI system, so it cannot resend a "
                               "governance, audit or mission event; a person does (the console, or a key without "
                               "either)", code="governed_credential")
    refuse_inactive(webhook, "resend this delivery")
    if not subscribes(webhook.events, original.event_type):
        raise Conflict(f"this webhook no longer subscribes to {original.event_type}, so this delivery cannot be "
                       "resent: subscribe it to that event type again first", code="event_not_subscribed")
    if not original.is_test and not still_wanted(webhook.events, webhook.filters, original.event_type,
                                                 await _payload_of(session, original.event_id)):
        raise Conflict("this webhook's filters no longer let this event through, so this delivery cannot be resent: "
                       "widen them again first", code="event_not_subscribed")
    delivery = _pending(auth.organization_id, webhook_id, original.event_id, original.event_type,
                        is_test=original.is_test)
    session.add(delivery)
    await session.flush()
    wake_workers_after_commit(session)
    return delivery_read(delivery, webhook_active=webhook.is_active)
