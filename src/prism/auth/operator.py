"""The deployment's operator on the command line, as the dispatcher sees them (`prism key create|revoke`).

The operator mints and revokes a key *for* its holder, a member of one organization: the call is the holder's
(the ledger entry's actor), made through door `cli` with credential `operator` (`operator:` and a random id of
the command's run, as registration names its one request). What the operator may do there:

- minting: the holder's role in the organization, as on every other path (a tenant's role without
  `keys.add_key` is refused here too: the operator cannot give a member a key their organization withholds);
- revoking: `keys.change_key`, whatever the holder's role, and even when the holder has left the organization.
  Revoking only takes away, and ending a leaked key must not wait for a tenant's roles (docs/governance.md).
"""

from __future__ import annotations

import secrets

from prism.auth.context import AuthContext, KeyUsage
from prism.auth.permissions import PermissionSet
from prism.auth.person import MembershipRow, person_context
from prism.kit.timeutil import utcnow
from prism.models import Organization, Tenant, User
from prism.registry.mega_tools import PLATFORM_SCOPES

DOOR = "cli"
CREDENTIAL_KIND = "operator"
KEY_NAME = "Operator command line"
REVOKE_PERMISSION = "keys.change_key"
# What the context's role says when revoking: the permission is the operator's, not the holder's role.
REVOKING_ROLE = "operator"


def operator_credential_id() -> str:
    """A random id naming one run of a command in the ledger (at most 36 characters, as the column holds)."""
    return f"{CREDENTIAL_KIND}:{secrets.token_hex(14)[:27]}"


def minting_context(user: User, membership: MembershipRow) -> AuthContext:
    """The operator minting a key for `user` in the organization of `membership`, with the user's role there."""
    return person_context(user, membership, credential_kind=CREDENTIAL_KIND, credential_id=operator_credential_id(),
                          key_name=KEY_NAME, signed_in_at=utcnow())


def revoking_context(user: User, organization: Organization, tenant: Tenant) -> AuthContext:
    """The operator revoking a key of `user` in `organization`: `keys.change_key` only, whatever the user's role
    (or none, once they left the organization)."""
    return AuthContext(
        tenant_id=tenant.id, tenant_subdomain=tenant.subdomain, tenant_name=tenant.name,
        organization_id=organization.id, organization_name=organization.name, user_id=user.id,
        user_email=user.email, role=REVOKING_ROLE, permissions=PermissionSet((REVOKE_PERMISSION,)),
        scopes=frozenset(PLATFORM_SCOPES), credential_kind=CREDENTIAL_KIND, credential_id=operator_credential_id(),
        key_prefix=CREDENTIAL_KIND, key_name=KEY_NAME, key_created_at=utcnow(), usage=KeyUsage(None))
