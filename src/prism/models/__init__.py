"""Platform tables. App tables live beside their apps; `prism.tables` imports them all."""

from prism.models.audit import AuditCheckpoint, AuditEntry, AuditHead
from prism.models.base import Base
from prism.models.identity import Membership, Role, User
from prism.models.keys import ApiKey
from prism.models.outbox import OutboxEvent
from prism.models.tenancy import Organization, Tenant

__all__ = [
    "ApiKey", "AuditCheckpoint", "AuditEntry", "AuditHead", "Base", "Membership", "Organization", "OutboxEvent",
    "Role", "Tenant", "User",
]
