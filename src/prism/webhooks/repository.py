"""SQL for webhooks and deliveries, always through the organization-scoped repository base."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.errors import NotFound
from prism.tenancy.repository import OrgRepository, text_search
from prism.webhooks.models import Webhook, WebhookDelivery

# Why a delivery of a switched-off webhook, or of an event its subscription no longer wants, ends unsent.
NOT_SENT_INACTIVE = "webhook is inactive: not sent"
NOT_SENT_UNSUBSCRIBED = "the webhook no longer subscribes to this event: not sent"


async def fail_unsent(session: AsyncSession, webhook_id: str, now: Any) -> None:
    """A webhook switched off: its deliveries still to send become FAILED unsent now, so that switching it back on
    before a worker reaches them does not send them (docs/webhooks.md). One a worker is sending (leased until after
    `now`: a datetime, or the database clock's expression) is left to its worker, which finds the webhook off when
    it next claims it. The last attempt's status code and answer are kept."""
    await session.execute(update(WebhookDelivery).where(
        WebhookDelivery.webhook_id == webhook_id, WebhookDelivery.due_at.is_not(None),
        WebhookDelivery.claimed_until.is_(None) | (WebhookDelivery.claimed_until < now),
    ).values(status="failed", due_at=None, error_message=NOT_SENT_INACTIVE, claimed_by=None, claimed_until=None))


class Webhooks(OrgRepository[Webhook]):
    def __init__(self, session: AsyncSession, organization_id: str) -> None:
        super().__init__(session, Webhook, organization_id, label="webhook")

    def filtered(self, *, is_active: bool | None, name: str | None) -> Select[Any]:
        stmt = self.base()
        if is_active is not None:
            stmt = stmt.where(Webhook.is_active.is_(is_active))
        return text_search(stmt, [Webhook.name], name)


class Deliveries(OrgRepository[WebhookDelivery]):
    def __init__(self, session: AsyncSession, organization_id: str) -> None:
        super().__init__(session, WebhookDelivery, organization_id, label="delivery")

    async def of_webhook(self, webhook_id: str, delivery_id: str) -> WebhookDelivery:
        row = (await self.session.execute(self.base().where(
            WebhookDelivery.id == delivery_id, WebhookDelivery.webhook_id == webhook_id))).scalar_one_or_none()
        if row is None:
            raise NotFound(f"delivery {delivery_id!r} not found for webhook {webhook_id!r}")
        return row

    def filtered(self, webhook_id: str, *, status: str | None, event_type: str | None) -> Select[Any]:
        stmt = self.base().where(WebhookDelivery.webhook_id == webhook_id)
        if status is not None:
            stmt = stmt.where(WebhookDelivery.status == status)
        if event_type is not None:
            stmt = stmt.where(WebhookDelivery.event_type == event_type)
        return stmt


async def paged(session: AsyncSession, stmt: Select[Any], order: list[Any], *, page: int,
                page_size: int) -> tuple[int, list[Any]]:
    """(total, rows of the page); `order` must end in a unique column so paging is stable."""
    total = (await session.execute(select(func.count()).select_from(stmt.order_by(None).subquery()))).scalar_one()
    rows = (await session.execute(stmt.order_by(*order).limit(page_size).offset((page - 1) * page_size))).scalars()
    return int(total), list(rows)
