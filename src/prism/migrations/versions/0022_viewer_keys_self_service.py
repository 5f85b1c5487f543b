"""viewer keys self-service: the built-in viewer role gains `keys.add_key` and `keys.change_key`

Every way of minting or revoking an API key (the console, the key dashboard, key registration) now asks the
keys handlers, which check these permissions. Viewers minted and revoked their own keys on the dashboard and
through registration before; the tenants' built-in viewer roles, stored when each tenant was made, keep that.
A built-in viewer role whose patterns an operator changed is left as it is.

Revision ID: 0022_viewer_keys_self_service
Revises: 0021_documents_postings
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022_viewer_keys_self_service"
down_revision: str | None = "0021_documents_postings"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Only the columns this migration reads or writes, as they are at this revision.
roles = sa.table("roles", sa.column("id", sa.String), sa.column("name", sa.String),
                 sa.column("permissions", sa.JSON), sa.column("is_builtin", sa.Boolean))

BEFORE = ["*.view_*"]
AFTER = ["*.view_*", "keys.add_key", "keys.change_key"]


def _replace(old: list[str], new: list[str]) -> None:
    connection = op.get_bind()
    viewers = connection.execute(sa.select(roles.c.id, roles.c.permissions).where(
        roles.c.name == "viewer", roles.c.is_builtin.is_(True))).all()
    for role_id, permissions in viewers:
        if list(permissions or []) == old:
            connection.execute(roles.update().where(roles.c.id == role_id).values(permissions=new))


def upgrade() -> None:
    _replace(BEFORE, AFTER)


def downgrade() -> None:
    _replace(AFTER, BEFORE)
