"""notifications: channels, templates and the notifications sent to members or channels.

A notification to a person goes only to a member of the caller's organization; a user outside it is not
found. Read state belongs to the notification: unread → read ⇄ unread, and either → archived.
"""

from __future__ import annotations

from string import Template as TextTemplate
from typing import Any, get_args

from sqlalchemy import func, select, update

from prism.apps import shipped_examples
from prism.apps.crud import Entity, crud, dependants, repo
from prism.apps.notifications.models import Channel, Notification, Template
from prism.apps.notifications.params import (
    ChannelCreate,
    ChannelList,
    ChannelUpdate,
    Inbox,
    NotificationAction,
    NotificationList,
    Priority,
    Send,
    SendTemplate,
    SendToRole,
    Target,
    TemplateCreate,
    TemplateList,
    TemplateUpdate,
)
from prism.apps.states import move
from prism.errors import Conflict, InvalidArguments, NotFound
from prism.kit.timeutil import utcnow
from prism.models import Membership, Role, User
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import to_record

app = HandlerApp("notifications", description="Notifications to people and channels, with templates.",
                 examples=shipped_examples())

NOTIFICATION_TRANSITIONS: dict[str, frozenset[str]] = {
    "unread": frozenset({"read", "archived"}),
    "read": frozenset({"unread", "archived"}),
    "archived": frozenset(),
}



async def _validate_template(call: HandlerCall, values: dict[str, Any], row: Any) -> dict[str, Any]:
    for name in ("subject", "body"):
        if values.get(name) is not None and not TextTemplate(values[name]).is_valid():
            raise InvalidArguments(f"{name}: invalid placeholder (use $name or ${{name}}; $$ for a dollar sign)",
                                   field=name)
    return values


async def _before_channel_delete(call: HandlerCall, channel: Channel) -> None:
    held = await dependants(call, ("notification", Notification, Notification.channel_id == channel.id))
    if held:
        raise Conflict(f"channel {channel.name} has {held}; archive it instead")


async def _before_template_delete(call: HandlerCall, template: Template) -> None:
    held = await dependants(call, ("notification", Notification, Notification.template_id == template.id))
    if held:
        raise Conflict(f"template {template.name} was sent as {held}; archive it instead")


crud(app, Entity(Channel, "channel", "notification channels", ChannelList, search=("name", "description"),
                 orderable=("name", "created_at"), default_ordering="name", create=ChannelCreate,
                 update=ChannelUpdate, group_by=("kind", "status"), before_delete=_before_channel_delete,
                 keywords=("chat channel", "alert channel", "chat room", "team channel")))
crud(app, Entity(Template, "template", "notification templates", TemplateList, search=("name", "subject", "body"),
                 orderable=("name", "created_at"), default_ordering="name", create=TemplateCreate,
                 update=TemplateUpdate, group_by=("status",), prepare=_validate_template,
                 before_delete=_before_template_delete,
                 keywords=("message template", "email template", "canned message", "form letter")))
crud(app, Entity(Notification, "notification", "notifications", NotificationList, search=("subject", "body"),
                 orderable=("created_at", "priority"), default_ordering="-created_at",
                 group_by=("status", "priority", "channel_id", "recipient_user_id"),
                 ranks={"priority": get_args(Priority)},
                 keywords=("message", "alert", "inbox", "notice", "reminder")))


async def _recipient(call: HandlerCall, target: Target) -> dict[str, Any]:
    """Stored target columns; a person must be a member of the caller's organization."""
    if target.channel_id:
        channel: Channel = await repo(call, Channel, "channel").get(target.channel_id)
        if channel.status != "active":
            raise Conflict(f"channel {channel.name} is archived")
        return {"channel_id": channel.id}
    stmt = select(User.id, User.email).join(Membership, Membership.user_id == User.id)
    stmt = stmt.where(User.id == target.user_id) if target.user_id else stmt.where(
        func.lower(User.email) == (target.email or "").lower())
    row = (await call.session.execute(stmt)).first()
    if row is None:
        raise NotFound(f"no member {target.user_id or target.email!r} in this organization")
    return {"recipient_user_id": row[0], "recipient_email": row[1]}


def _add(call: HandlerCall, **values: Any) -> Notification:
    row: Notification = repo(call, Notification, "notification").add(sender_user_id=call.auth.user_id, **values)
    return row


@app.handler("notification_send", "notification", "send", params=Send, scope="execute",
             permission="notifications.add_notification",
             description="Send a notification to a member of the organization (by user id or email) or post it "
                         "to a channel.",
                         keywords=("notify", "message someone", "alert user", "post to channel", "email someone",
                                   "direct message"))
async def send(call: HandlerCall, p: Send) -> dict[str, Any]:
    row = _add(call, **await _recipient(call, p), subject=p.subject, body=p.body, priority=p.priority)
    await call.session.flush()
    return to_record(row)


MAX_BODY = 50_000  # a notification's body, sent or rendered


def _rendered_length(text: str, variables: dict[str, str]) -> int:
    """The length `text` would have once rendered (placeholders with no value count as themselves)."""
    length = len(text)
    for match in TextTemplate.pattern.finditer(text):
        name = match.group("named") or match.group("braced")
        if name in variables:
            length += len(variables[name]) - len(match.group(0))
    return length


@app.handler("notification_send", "notification", "sendTemplate", params=SendTemplate, scope="execute",
             permission="notifications.add_notification",
             description="Render a notification template with the given values and send it to a member or "
                         "channel.", keywords=("templated message", "notify with template"))
async def send_template(call: HandlerCall, p: SendTemplate) -> dict[str, Any]:
    template: Template = await repo(call, Template, "template").get(p.template_id)
    if template.status != "active":
        raise Conflict(f"template {template.name} is archived")
    if _rendered_length(template.body, p.variables) > MAX_BODY:  # checked before rendering: `$v` 25,000 times
        raise InvalidArguments(f"variables: the rendered body would be longer than {MAX_BODY:,} characters, as "
                               "a notification's body may be", field="variables")
    try:
        subject = TextTemplate(template.subject).substitute(p.variables)
        body = TextTemplate(template.body).substitute(p.variables)
    except KeyError as exc:
        raise InvalidArguments(f"variables: missing a value for {exc.args[0]!r}",
                               field="variables") from exc
    row = _add(call, **await _recipient(call, p), subject=subject[:500], body=body, priority=p.priority,
               template_id=template.id)
    await call.session.flush()
    return to_record(row)


@app.handler("notification_send", "notification", "sendToRole", params=SendToRole, scope="execute",
             permission="notifications.add_notification",
             description="Send one copy of a notification to every member of the organization with a role.",
             keywords=("notify all admins", "broadcast", "message a team", "group message"))
async def send_to_role(call: HandlerCall, p: SendToRole) -> dict[str, Any]:
    members = (await call.session.execute(
        select(User.id, User.email).join(Membership, Membership.user_id == User.id)
        .join(Role, Role.id == Membership.role_id)
        .where(Role.name == p.role, User.is_active.is_(True))
        .order_by(User.email))).all()
    rows = [_add(call, recipient_user_id=user_id, recipient_email=email, subject=p.subject, body=p.body,
                 priority=p.priority) for user_id, email in members]
    await call.session.flush()
    return {"role": p.role, "sent": len(rows), "notification_ids": [r.id for r in rows]}


async def _move(call: HandlerCall, p: NotificationAction, target: str) -> dict[str, Any]:
    row: Notification = await repo(call, Notification, "notification").get(p.id)
    move(row, target, NOTIFICATION_TRANSITIONS, "notification")
    row.read_at = utcnow() if target == "read" else row.read_at if target == "archived" else None
    await call.session.flush()
    return to_record(row)


@app.handler("workflow_action", "notification", "markRead", params=NotificationAction, scope="execute",
             description="Mark a notification as read.", keywords=("seen", "acknowledge"))
async def mark_read(call: HandlerCall, p: NotificationAction) -> dict[str, Any]:
    return await _move(call, p, "read")


@app.handler("workflow_action", "notification", "markUnread", params=NotificationAction, scope="execute",
             description="Mark a read notification as unread again.", keywords=("unseen",))
async def mark_unread(call: HandlerCall, p: NotificationAction) -> dict[str, Any]:
    return await _move(call, p, "unread")


@app.handler("workflow_action", "notification", "archive", params=NotificationAction, scope="execute",
             description="Archive a notification.", keywords=("dismiss", "clear notification"))
async def archive(call: HandlerCall, p: NotificationAction) -> dict[str, Any]:
    return await _move(call, p, "archived")


@app.handler("workflow_action", "notification", "markAllRead", params=Inbox, scope="execute",
             permission="notifications.change_notification",
             description="Mark every unread notification addressed to the caller as read.",
             keywords=("clear inbox", "read all"))
async def mark_all_read(call: HandlerCall, p: Inbox) -> dict[str, Any]:
    result = await call.session.execute(update(Notification).where(
        Notification.recipient_user_id == call.auth.user_id,
        Notification.status == "unread").values(status="read", read_at=utcnow()))
    return {"marked_read": int(getattr(result, "rowcount", 0) or 0)}


@app.handler("report_query", "notification", "inbox", params=Inbox, scope="read",
             permission="notifications.view_notification",
             description="The caller's inbox: unread count by priority and the latest unread notifications.",
             keywords=("my notifications", "unread messages", "what's new"))
async def inbox(call: HandlerCall, p: Inbox) -> dict[str, Any]:
    mine = repo(call, Notification, "notification").base().where(
        Notification.recipient_user_id == call.auth.user_id, Notification.status == "unread")
    unread = mine.subquery()
    counts = (await call.session.execute(select(unread.c.priority, func.count()).group_by(unread.c.priority))).all()
    latest = (await call.session.execute(mine.order_by(Notification.created_at.desc(), Notification.id.desc())
                                         .limit(p.limit))).scalars().all()
    by_priority = {priority: count for priority, count in counts}
    return {"unread": sum(by_priority.values()), "by_priority": by_priority, "latest": [to_record(n) for n in latest]}
