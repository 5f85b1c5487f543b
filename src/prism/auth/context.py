from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from prism.auth.permissions import PermissionSet

# The credential kinds of a person at the controls (prism.auth.person and prism.auth.operator build them).
PERSON_CREDENTIALS = frozenset({"console", "password", "operator"})


@dataclass(slots=True)
class KeyUsage:
    """When the key was last used, as this process knows it; shared by every request of one cached key."""

    last_used_at: datetime | None


@dataclass(frozen=True, slots=True)
class AuthContext:
    """Who is calling, resolved once per request by the door; the dispatcher trusts only this."""

    tenant_id: str
    tenant_subdomain: str
    tenant_name: str | None
    organization_id: str
    organization_name: str
    user_id: str
    user_email: str
    role: str
    permissions: PermissionSet
    scopes: frozenset[str]
    credential_kind: str
    credential_id: str
    key_prefix: str
    key_name: str
    key_created_at: datetime
    usage: KeyUsage
    # Governance: the persona whose policy applies and the AI system the credential acts for (if any).
    persona_id: str | None = None
    ai_system_id: str | None = None
    # The OAuth client the caller acts through (credential_kind "oauth"); None for API keys.
    client_id: str | None = None
    # The MCP tool surface the credential asks for (an API key's option); None: the deployment's setting.
    tool_surface: str | None = None

    @property
    def is_person(self) -> bool:
        """Whether a person is at the controls: signed in to the console or the key dashboard, trading their
        password on key registration, or the deployment's operator on the command line (`prism key`); not a
        credential an agent holds (an API key, an OAuth token)."""
        return self.credential_kind in PERSON_CREDENTIALS

    @property
    def governed(self) -> bool:
        """Whether a persona or an AI system applies: the credential is an agent's, and may not change what
        governs or watches it (docs/governance.md "Personas")."""
        return self.persona_id is not None or self.ai_system_id is not None
