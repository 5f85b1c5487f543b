"""oversight mission: an oversight request names the mission its escalated call named

An approval was bound to the credential, the coordinate and the arguments, not to the mission that pays for the
call: an approved call could be repeated under another mission (or none), and the person deciding could not see
which budget it would spend. `oversight_requests.mission_id` (null: the call named none) is compared when the
approval is used. Requests opened before this upgrade have none: one that was opened under a mission and is still
waiting to be used is refused as approving another call, and is asked for again.

Revision ID: 0033_oversight_mission
Revises: 0032_webhook_pending_orgs
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0033_oversight_mission"
down_revision: str | None = "0032_webhook_pending_orgs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("oversight_requests", sa.Column("mission_id", sa.String(length=36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("oversight_requests") as batch:
        batch.drop_column("mission_id")
