"""`config_manage/governance/webhook/...` and `.../webhook_delivery/...`: the webhook management API's
operations as handlers, so that the console (and any door) manages webhooks through the dispatcher.

Each wraps the same function of prism.webhooks.service as the REST API, with the same permissions
(`governance.view_webhook`, `add_`, `change_`, `delete_`): the seeded viewer only reads. `create` and
`rotate_secret` answer the signing secret once; Prism keeps it sealed (prism.webhooks.signing), and the
ledger keeps only the digest of the arguments, never the answer.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from prism.apps.params import Params, ReadParams
from prism.config import Settings
from prism.kit.paging import Paging
from prism.registry import HandlerCall
from prism.webhooks import service
from prism.webhooks.schemas import DeliveryQuery, WebhookCreate, WebhookQuery, WebhookUpdate

from prism.apps.governance.handlers import app  # isort: skip  (the app these handlers belong to)

VIEW, ADD, CHANGE, DELETE = (f"governance.{verb}_webhook" for verb in ("view", "add", "change", "delete"))
KEYWORDS = ("webhook", "callback", "event subscription", "notification endpoint", "signing secret")
MAX_KEEP_PREVIOUS_SECONDS = 7 * 24 * 3600
Id = Field(..., min_length=1, max_length=64, description="The webhook's id (whk_...).")


class WebhookList(WebhookQuery, Params):
    pass


class WebhookCreateParams(WebhookCreate, Params):
    pass


class WebhookUpdateParams(WebhookUpdate, Params):
    id: str = Id


class DeliveryList(DeliveryQuery, Params):
    webhook_id: str = Id


class DeliveryRead(Params):
    webhook_id: str = Id
    id: str = Field(..., min_length=1, max_length=64, description="The delivery's id.")


class DeliveryResend(DeliveryRead):
    pass


def _query(model: type[Paging], p: Paging, *drop: str) -> Any:
    return model.model_validate(p.model_dump(exclude=set(drop)))


@app.handler("config_manage", "webhook", "list", params=WebhookList, scope="read", permission=VIEW,
             keywords=KEYWORDS, description="List the organization's webhooks (never their secrets).")
async def list_webhooks(call: HandlerCall, p: WebhookList) -> dict[str, Any]:
    return await service.list_webhooks(call.session, call.auth, _query(WebhookQuery, p))


@app.handler("config_manage", "webhook", "read", params=ReadParams, scope="read", permission=VIEW,
             keywords=KEYWORDS, description="Read one webhook.")
async def read_webhook(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    return await service.get_webhook(call.session, call.auth, p.id)


async def _check_receiver(p: WebhookCreateParams | WebhookUpdateParams, settings: Settings) -> service.CheckedUrl:
    """The receiver URL's host is resolved before the call's transaction (service.check_receiver_url)."""
    return await service.check_receiver_url(settings, p.url)


@app.handler("config_manage", "webhook", "create", params=WebhookCreateParams, scope="write", permission=ADD,
             keywords=KEYWORDS, description="Create a webhook; its signing secret is in this answer once.",
             prepare=_check_receiver)
async def create_webhook(call: HandlerCall, p: WebhookCreateParams) -> dict[str, Any]:
    body = WebhookCreate.model_validate(p.model_dump(exclude_unset=True))
    return await service.create_webhook(call.session, call.auth, call.settings, body, call.prepared)


@app.handler("config_manage", "webhook", "update", params=WebhookUpdateParams, scope="write", permission=CHANGE,
             keywords=KEYWORDS, description="Change a webhook: only the fields given (null clears the description, "
             "events, filters or custom headers; other fields refuse null).",
             prepare=_check_receiver)
async def update_webhook(call: HandlerCall, p: WebhookUpdateParams) -> dict[str, Any]:
    body = WebhookUpdate.model_validate(p.model_dump(exclude_unset=True, exclude={"id"}))
    return await service.update_webhook(call.session, call.auth, call.settings, p.id, body, call.prepared)


class RotateParams(ReadParams):
    keep_previous_seconds: int = Field(0, ge=0, le=MAX_KEEP_PREVIOUS_SECONDS, description=(
        "How long the replaced secret goes on signing beside the new one (a second v1= in the signature header), "
        "while receivers move to the new one; 0 (default): it stops now. At most 7 days."))


@app.handler("config_manage", "webhook", "rotate_secret", params=RotateParams, scope="write", permission=CHANGE,
             keywords=(*KEYWORDS, "rotate secret", "roll secret"),
             description="Replace a webhook's signing secret with a new one made by Prism, in this answer once; the "
                         "old one may go on signing beside it for a while (keep_previous_seconds).")
async def rotate_secret(call: HandlerCall, p: RotateParams) -> dict[str, Any]:
    return await service.rotate_secret(call.session, call.auth, call.settings, p.id,
                                       keep_previous_seconds=p.keep_previous_seconds)


@app.handler("config_manage", "webhook", "delete", params=ReadParams, scope="write", permission=DELETE,
             destructive=True, keywords=KEYWORDS, description="Delete a webhook and its delivery history.")
async def delete_webhook(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    await service.delete_webhook(call.session, call.auth, p.id)
    return {"id": p.id, "deleted": True}


@app.handler("config_manage", "webhook", "test", params=ReadParams, scope="write", permission=CHANGE,
             keywords=(*KEYWORDS, "test event", "ping"),
             description="Send a test event to this webhook through the real delivery pipeline.")
async def send_test_event(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    return await service.send_test_event(call.session, call.auth, p.id)


@app.handler("config_manage", "webhook_delivery", "list", params=DeliveryList, scope="read", permission=VIEW,
             keywords=(*KEYWORDS, "delivery history"), description="A webhook's deliveries, newest first.")
async def list_deliveries(call: HandlerCall, p: DeliveryList) -> dict[str, Any]:
    return await service.list_deliveries(call.session, call.auth, p.webhook_id,
                                         _query(DeliveryQuery, p, "webhook_id"))


@app.handler("config_manage", "webhook_delivery", "read", params=DeliveryRead, scope="read", permission=VIEW,
             keywords=(*KEYWORDS, "delivery history"),
             description="One delivery of a webhook: its event, attempts, status and the receiver's answer.")
async def read_delivery(call: HandlerCall, p: DeliveryRead) -> dict[str, Any]:
    return await service.get_delivery(call.session, call.auth, p.webhook_id, p.id)


@app.handler("config_manage", "webhook_delivery", "resend", params=DeliveryResend, scope="write",
             permission=CHANGE, keywords=(*KEYWORDS, "redeliver", "retry delivery"),
             description="Deliver a delivery's event again (same bytes, a fresh signature).")
async def resend_delivery(call: HandlerCall, p: DeliveryResend) -> dict[str, Any]:
    return await service.resend_delivery(call.session, call.auth, p.webhook_id, p.id)
