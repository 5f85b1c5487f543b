"""persona require mission: a persona may refuse its credentials' calls that name no mission

Existing personas keep calling as before: the column starts false on every row (a server default, so the
upgrade needs no pass over the rows), and stepping down drops it.

Revision ID: 0024_persona_require_mission
Revises: 0023_documents_unicode_words
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024_persona_require_mission"
down_revision: str | None = "0023_documents_unicode_words"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("personas") as batch:
        batch.add_column(sa.Column("require_mission", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("personas") as batch:
        batch.drop_column("require_mission")
