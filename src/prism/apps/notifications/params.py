"""Parameter models of the notifications app."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from prism.apps.params import ListParams, Params

Priority = Literal["low", "normal", "high", "urgent"]  # lowest first: lists ordered by priority follow it
ChannelKind = Literal["in_app", "email", "chat", "sms", "pager"]
NotificationStatus = Literal["unread", "read", "archived"]


class ChannelList(ListParams):
    kind: ChannelKind | None = Field(None, description="Only channels of this kind.")
    status: Literal["active", "archived"] | None = Field(None, description="Only channels in this state.")


class ChannelCreate(Params):
    name: str = Field(..., min_length=1, max_length=255, description="Channel name, unique (e.g. #ops-alerts).")
    kind: ChannelKind = Field("in_app", description="Where the channel's messages are read.")
    description: str = Field("", max_length=5000, description="Who listens and what belongs here.")


class ChannelUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Channel id.")
    description: str | None = Field(None, max_length=5000, description="Who listens and what belongs here.")
    status: Literal["active", "archived"] | None = Field(None, description="Archived channels take no messages.")


class TemplateList(ListParams):
    status: Literal["active", "archived"] | None = Field(None, description="Only templates in this state.")


class TemplateCreate(Params):
    name: str = Field(..., min_length=1, max_length=255, description="Template name, unique per organization.")
    subject: str = Field(..., min_length=1, max_length=500, description="Subject; $name placeholders allowed.")
    body: str = Field(..., min_length=1, max_length=50_000, description="Body; $name placeholders allowed.")


class TemplateUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Template id.")
    subject: str | None = Field(None, min_length=1, max_length=500, description="Subject with placeholders.")
    body: str | None = Field(None, min_length=1, max_length=50_000, description="Body with placeholders.")
    status: Literal["active", "archived"] | None = Field(None, description="Archived templates cannot be sent.")


class NotificationList(ListParams):
    status: NotificationStatus | None = Field(None, description="Only unread, read or archived notifications.")
    recipient_user_id: str | None = Field(None, max_length=64, description="Only notifications to this user.")
    channel_id: str | None = Field(None, max_length=64, description="Only notifications posted to this channel.")
    priority: Priority | None = Field(None, description="Only notifications of this priority.")


class Target(Params):
    user_id: str | None = Field(None, max_length=64, description="Recipient user id (a member of the organization).")
    email: str | None = Field(None, max_length=320, description="Recipient user email (a member).")
    channel_id: str | None = Field(None, max_length=64, description="Channel to post to instead of a user.")
    priority: Priority = Field("normal", description="How urgent the notification is.")

    @model_validator(mode="after")
    def _one_target(self) -> Target:
        if sum(v is not None for v in (self.user_id, self.email, self.channel_id)) != 1:
            raise ValueError("give exactly one of user_id, email or channel_id")
        return self


class Send(Target):
    subject: str = Field(..., min_length=1, max_length=500, description="Notification subject.")
    body: str = Field("", max_length=50_000, description="Notification text.")


class SendTemplate(Target):
    template_id: str = Field(..., min_length=1, max_length=64, description="Template to render.")
    variables: dict[str, str] = Field(default_factory=dict, description="Values of the template's placeholders.")


class SendToRole(Params):
    role: str = Field(..., min_length=1, max_length=63, description="Every member with this role gets a copy.")
    subject: str = Field(..., min_length=1, max_length=500, description="Notification subject.")
    body: str = Field("", max_length=50_000, description="Notification text.")
    priority: Priority = Field("normal", description="How urgent the notification is.")


class NotificationAction(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Notification id.")


class Inbox(Params):
    limit: int = Field(10, ge=1, le=100, description="How many of the latest unread notifications to include.")
