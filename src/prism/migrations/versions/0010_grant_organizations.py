"""grant organizations: the organizations a user consented an OAuth grant to act in

Revision ID: 0010_grant_organizations
Revises: 0009_mcp_legacy_streams
"""

from collections.abc import Sequence

revision: str = "0010_grant_organizations"
down_revision: str | None = "0009_mcp_legacy_streams"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
