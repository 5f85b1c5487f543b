"""governance: personas, AI systems, oversight requests, missions, decisions, violations

Revision ID: 0005_governance
Revises: 0003_oauth
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import prism.models.base

revision: str = "0005_governance"
down_revision: str | None = "0003_oauth"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("governance_violations", "governance_decisions", "oversight_requests", "missions", "ai_systems", "personas")


def upgrade() -> None:
    op.create_table(
        "ai_systems",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("risk_level", sa.String(length=16), nullable=False),
        sa.Column("created_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_ai_systems_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ai_systems")),
        sa.UniqueConstraint("organization_id", "name", name="uq_ai_systems_org_name"),
    )
    op.create_index(op.f("ix_ai_systems_organization_id"), "ai_systems", ["organization_id"], unique=False)
    op.create_table(
        "governance_decisions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=36), nullable=False),
        sa.Column("ai_system_id", sa.String(length=36), nullable=False),
        sa.Column("credential_id", sa.String(length=36), nullable=False),
        sa.Column("coordinate", sa.String(length=255), nullable=False),
        sa.Column("decision", sa.String(length=8), nullable=False),
        sa.Column("decision_type", sa.String(length=32), nullable=False),
        sa.Column("primary_reason", sa.Text(), nullable=False),
        sa.Column("policies_evaluated", sa.Integer(), nullable=False),
        sa.Column("policies_violated", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("trace_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_governance_decisions_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_governance_decisions")),
    )
    op.create_index(
        op.f("ix_governance_decisions_ai_system_id"), "governance_decisions", ["ai_system_id"], unique=False
    )
    op.create_index(
        "ix_governance_decisions_org_created", "governance_decisions", ["organization_id", "created_at"], unique=False
    )
    op.create_table(
        "governance_violations",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=36), nullable=False),
        sa.Column("audit_entry_id", sa.Integer(), nullable=False),
        sa.Column("audit_seq", sa.Integer(), nullable=False),
        sa.Column("persona_id", sa.String(length=36), nullable=False),
        sa.Column("persona_version", sa.Integer(), nullable=False),
        sa.Column("policy_name", sa.String(length=100), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("ai_system_id", sa.String(length=36), nullable=True),
        sa.Column("coordinate", sa.String(length=255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("detected_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_governance_violations_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_governance_violations")),
        sa.UniqueConstraint(
            "organization_id",
            "audit_entry_id",
            "persona_id",
            "persona_version",
            name="uq_governance_violations_entry_persona",
        ),
    )
    op.create_table(
        "missions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("budget_ceiling", sa.Integer(), nullable=False),
        sa.Column("spent", sa.Integer(), nullable=False),
        sa.Column("budget_exceeded_at", prism.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_by", sa.String(length=36), nullable=False),
        sa.Column("started_at", prism.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("ended_at", prism.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_missions_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_missions")),
    )
    op.create_index(op.f("ix_missions_organization_id"), "missions", ["organization_id"], unique=False)
    op.create_table(
        "oversight_requests",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=36), nullable=False),
        sa.Column("persona_id", sa.String(length=36), nullable=True),
        sa.Column("credential_id", sa.String(length=36), nullable=False),
        sa.Column("requested_by", sa.String(length=36), nullable=False),
        sa.Column("coordinate", sa.String(length=255), nullable=False),
        sa.Column("arguments_digest", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("sla_deadline", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("decided_by", sa.String(length=36), nullable=True),
        sa.Column("decided_at", prism.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("decision_note", sa.Text(), nullable=False),
        sa.Column("consumed_at", prism.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_oversight_requests_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_oversight_requests")),
    )
    op.create_index(
        "ix_oversight_requests_org_status", "oversight_requests", ["organization_id", "status"], unique=False
    )
    op.create_table(
        "personas",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("allow", sa.JSON(), nullable=False),
        sa.Column("deny", sa.JSON(), nullable=False),
        sa.Column("oversight", sa.JSON(), nullable=False),
        sa.Column("default_effect", sa.String(length=8), nullable=False),
        sa.Column("cost_cap", sa.Integer(), nullable=True),
        sa.Column("oversight_priority", sa.String(length=16), nullable=False),
        sa.Column("oversight_sla_seconds", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_personas_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_personas")),
        sa.UniqueConstraint("organization_id", "name", name="uq_personas_org_name"),
    )
    op.create_index(op.f("ix_personas_organization_id"), "personas", ["organization_id"], unique=False)
    op.add_column("api_keys", sa.Column("persona_id", sa.String(length=36), nullable=True))
    op.add_column("api_keys", sa.Column("ai_system_id", sa.String(length=36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("ai_system_id")
        batch.drop_column("persona_id")
    for table in TABLES:
        op.drop_table(table)
