"""business domain: claims, maintenance, itsm, documents, agents, notifications, integrations,
finance payments and purchase orders, spare-part stock movements

Revision ID: 0006_domain
Revises: 0005_governance
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import prism.models.base

revision: str = "0006_domain"
down_revision: str | None = "0005_governance"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('agents_agents',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('model', sa.String(length=128), nullable=False),
    sa.Column('instructions', sa.Text(), nullable=False),
    sa.Column('max_steps', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_agents_agents_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_agents_agents')),
    sa.UniqueConstraint('organization_id', 'name', name=op.f('uq_agents_agents_organization_id'))
    )
    op.create_index(op.f('ix_agents_agents_organization_id'), 'agents_agents', ['organization_id'], unique=False)
    op.create_index(op.f('ix_agents_agents_status'), 'agents_agents', ['status'], unique=False)
    op.create_table('claims_payers',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('code', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('contact_email', sa.String(length=320), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_claims_payers_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_claims_payers')),
    sa.UniqueConstraint('organization_id', 'code', name=op.f('uq_claims_payers_organization_id'))
    )
    op.create_index(op.f('ix_claims_payers_organization_id'), 'claims_payers', ['organization_id'], unique=False)
    op.create_index(op.f('ix_claims_payers_status'), 'claims_payers', ['status'], unique=False)
    op.create_table('documents_collections',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_documents_collections_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_documents_collections')),
    sa.UniqueConstraint('organization_id', 'name', name=op.f('uq_documents_collections_organization_id'))
    )
    op.create_index(op.f('ix_documents_collections_organization_id'), 'documents_collections', ['organization_id'], unique=False)
    op.create_table('integrations_endpoints',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('base_url', sa.String(length=2048), nullable=False),
    sa.Column('default_method', sa.String(length=8), nullable=False),
    sa.Column('headers', sa.JSON(), nullable=False),
    sa.Column('timeout_seconds', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('last_called_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('last_status_code', sa.Integer(), nullable=True),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_integrations_endpoints_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_integrations_endpoints')),
    sa.UniqueConstraint('organization_id', 'name', name=op.f('uq_integrations_endpoints_organization_id'))
    )
    op.create_index(op.f('ix_integrations_endpoints_organization_id'), 'integrations_endpoints', ['organization_id'], unique=False)
    op.create_index(op.f('ix_integrations_endpoints_status'), 'integrations_endpoints', ['status'], unique=False)
    op.create_table('itsm_services',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('owner_email', sa.String(length=320), nullable=False),
    sa.Column('tier', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_itsm_services_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_itsm_services')),
    sa.UniqueConstraint('organization_id', 'name', name=op.f('uq_itsm_services_organization_id'))
    )
    op.create_index(op.f('ix_itsm_services_organization_id'), 'itsm_services', ['organization_id'], unique=False)
    op.create_index(op.f('ix_itsm_services_status'), 'itsm_services', ['status'], unique=False)
    op.create_table('itsm_sla_policies',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('priority', sa.String(length=8), nullable=False),
    sa.Column('resolve_hours', sa.Integer(), nullable=False),
    sa.Column('description', sa.String(length=500), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_itsm_sla_policies_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_itsm_sla_policies')),
    sa.UniqueConstraint('organization_id', 'priority', name=op.f('uq_itsm_sla_policies_organization_id'))
    )
    op.create_index(op.f('ix_itsm_sla_policies_organization_id'), 'itsm_sla_policies', ['organization_id'], unique=False)
    op.create_table('maintenance_assets',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('tag', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('category', sa.String(length=64), nullable=False),
    sa.Column('location', sa.String(length=255), nullable=False),
    sa.Column('criticality', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('commissioned_on', sa.Date(), nullable=True),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_maintenance_assets_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_maintenance_assets')),
    sa.UniqueConstraint('organization_id', 'tag', name=op.f('uq_maintenance_assets_organization_id'))
    )
    op.create_index(op.f('ix_maintenance_assets_organization_id'), 'maintenance_assets', ['organization_id'], unique=False)
    op.create_index(op.f('ix_maintenance_assets_status'), 'maintenance_assets', ['status'], unique=False)
    op.create_table('notifications_channels',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_notifications_channels_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_notifications_channels')),
    sa.UniqueConstraint('organization_id', 'name', name=op.f('uq_notifications_channels_organization_id'))
    )
    op.create_index(op.f('ix_notifications_channels_organization_id'), 'notifications_channels', ['organization_id'], unique=False)
    op.create_index(op.f('ix_notifications_channels_status'), 'notifications_channels', ['status'], unique=False)
    op.create_table('notifications_templates',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('subject', sa.String(length=500), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_notifications_templates_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_notifications_templates')),
    sa.UniqueConstraint('organization_id', 'name', name=op.f('uq_notifications_templates_organization_id'))
    )
    op.create_index(op.f('ix_notifications_templates_organization_id'), 'notifications_templates', ['organization_id'], unique=False)
    op.create_index(op.f('ix_notifications_templates_status'), 'notifications_templates', ['status'], unique=False)
    op.create_table('agents_instances',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('agent_id', sa.String(length=36), nullable=False),
    sa.Column('task', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('step_count', sa.Integer(), nullable=False),
    sa.Column('result', sa.Text(), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('spawned_by', sa.String(length=320), nullable=False),
    sa.Column('started_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('ended_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['agent_id'], ['agents_agents.id'], name=op.f('fk_agents_instances_agent_id_agents_agents')),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_agents_instances_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_agents_instances'))
    )
    op.create_index(op.f('ix_agents_instances_agent_id'), 'agents_instances', ['agent_id'], unique=False)
    op.create_index(op.f('ix_agents_instances_organization_id'), 'agents_instances', ['organization_id'], unique=False)
    op.create_index(op.f('ix_agents_instances_status'), 'agents_instances', ['status'], unique=False)
    op.create_table('claims_patients',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('member_id', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('birth_date', sa.Date(), nullable=True),
    sa.Column('payer_id', sa.String(length=36), nullable=True),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_claims_patients_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['payer_id'], ['claims_payers.id'], name=op.f('fk_claims_patients_payer_id_claims_payers')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_claims_patients')),
    sa.UniqueConstraint('organization_id', 'member_id', name=op.f('uq_claims_patients_organization_id'))
    )
    op.create_index(op.f('ix_claims_patients_organization_id'), 'claims_patients', ['organization_id'], unique=False)
    op.create_index(op.f('ix_claims_patients_payer_id'), 'claims_patients', ['payer_id'], unique=False)
    op.create_index(op.f('ix_claims_patients_status'), 'claims_patients', ['status'], unique=False)
    op.create_table('documents_documents',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('collection_id', sa.String(length=36), nullable=True),
    sa.Column('title', sa.String(length=255), nullable=False),
    sa.Column('content_type', sa.String(length=64), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('source_uri', sa.String(length=2048), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('size_bytes', sa.Integer(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('word_count', sa.Integer(), nullable=False),
    sa.Column('chunk_count', sa.Integer(), nullable=False),
    sa.Column('error', sa.String(length=1000), nullable=False),
    sa.Column('processed_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['collection_id'], ['documents_collections.id'], name=op.f('fk_documents_documents_collection_id_documents_collections')),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_documents_documents_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_documents_documents'))
    )
    op.create_index(op.f('ix_documents_documents_collection_id'), 'documents_documents', ['collection_id'], unique=False)
    op.create_index(op.f('ix_documents_documents_organization_id'), 'documents_documents', ['organization_id'], unique=False)
    op.create_index(op.f('ix_documents_documents_sha256'), 'documents_documents', ['sha256'], unique=False)
    op.create_index(op.f('ix_documents_documents_status'), 'documents_documents', ['status'], unique=False)
    op.create_table('finance_purchase_orders',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('vendor_id', sa.String(length=36), nullable=False),
    sa.Column('number', sa.String(length=64), nullable=False),
    sa.Column('description', sa.String(length=1000), nullable=False),
    sa.Column('amount_cents', sa.Integer(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('expected_on', sa.Date(), nullable=True),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('approved_by', sa.String(length=320), nullable=False),
    sa.Column('received_on', sa.Date(), nullable=True),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_finance_purchase_orders_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['vendor_id'], ['finance_vendors.id'], name=op.f('fk_finance_purchase_orders_vendor_id_finance_vendors')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_finance_purchase_orders')),
    sa.UniqueConstraint('organization_id', 'number', name=op.f('uq_finance_purchase_orders_organization_id'))
    )
    op.create_index(op.f('ix_finance_purchase_orders_organization_id'), 'finance_purchase_orders', ['organization_id'], unique=False)
    op.create_index(op.f('ix_finance_purchase_orders_status'), 'finance_purchase_orders', ['status'], unique=False)
    op.create_index(op.f('ix_finance_purchase_orders_vendor_id'), 'finance_purchase_orders', ['vendor_id'], unique=False)
    op.create_table('integrations_call_logs',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('endpoint_id', sa.String(length=36), nullable=False),
    sa.Column('method', sa.String(length=8), nullable=False),
    sa.Column('url', sa.String(length=4096), nullable=False),
    sa.Column('request_bytes', sa.Integer(), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('ok', sa.Boolean(), nullable=False),
    sa.Column('duration_ms', sa.Integer(), nullable=False),
    sa.Column('error', sa.String(length=1000), nullable=False),
    sa.Column('response_excerpt', sa.Text(), nullable=False),
    sa.Column('actor_email', sa.String(length=320), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['endpoint_id'], ['integrations_endpoints.id'], name=op.f('fk_integrations_call_logs_endpoint_id_integrations_endpoints'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_integrations_call_logs_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_integrations_call_logs'))
    )
    op.create_index(op.f('ix_integrations_call_logs_endpoint_id'), 'integrations_call_logs', ['endpoint_id'], unique=False)
    op.create_index(op.f('ix_integrations_call_logs_organization_id'), 'integrations_call_logs', ['organization_id'], unique=False)
    op.create_table('itsm_tickets',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('title', sa.String(length=255), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('priority', sa.String(length=8), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('service_id', sa.String(length=36), nullable=True),
    sa.Column('requester_email', sa.String(length=320), nullable=False),
    sa.Column('assignee_email', sa.String(length=320), nullable=False),
    sa.Column('resolution', sa.Text(), nullable=False),
    sa.Column('sla_due_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('resolved_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('closed_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_itsm_tickets_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['service_id'], ['itsm_services.id'], name=op.f('fk_itsm_tickets_service_id_itsm_services')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_itsm_tickets')),
    sa.UniqueConstraint('organization_id', 'number', name=op.f('uq_itsm_tickets_organization_id'))
    )
    op.create_index(op.f('ix_itsm_tickets_assignee_email'), 'itsm_tickets', ['assignee_email'], unique=False)
    op.create_index(op.f('ix_itsm_tickets_organization_id'), 'itsm_tickets', ['organization_id'], unique=False)
    op.create_index(op.f('ix_itsm_tickets_service_id'), 'itsm_tickets', ['service_id'], unique=False)
    op.create_index(op.f('ix_itsm_tickets_status'), 'itsm_tickets', ['status'], unique=False)
    op.create_table('maintenance_meter_readings',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('asset_id', sa.String(length=36), nullable=False),
    sa.Column('meter', sa.String(length=64), nullable=False),
    sa.Column('value', sa.Float(), nullable=False),
    sa.Column('unit', sa.String(length=16), nullable=False),
    sa.Column('read_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['asset_id'], ['maintenance_assets.id'], name=op.f('fk_maintenance_meter_readings_asset_id_maintenance_assets'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_maintenance_meter_readings_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_maintenance_meter_readings'))
    )
    op.create_index(op.f('ix_maintenance_meter_readings_asset_id'), 'maintenance_meter_readings', ['asset_id'], unique=False)
    op.create_index(op.f('ix_maintenance_meter_readings_organization_id'), 'maintenance_meter_readings', ['organization_id'], unique=False)
    op.create_table('maintenance_plans',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('asset_id', sa.String(length=36), nullable=False),
    sa.Column('title', sa.String(length=255), nullable=False),
    sa.Column('interval_days', sa.Integer(), nullable=False),
    sa.Column('next_due', sa.Date(), nullable=False),
    sa.Column('priority', sa.String(length=16), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['asset_id'], ['maintenance_assets.id'], name=op.f('fk_maintenance_plans_asset_id_maintenance_assets')),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_maintenance_plans_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_maintenance_plans'))
    )
    op.create_index(op.f('ix_maintenance_plans_asset_id'), 'maintenance_plans', ['asset_id'], unique=False)
    op.create_index(op.f('ix_maintenance_plans_organization_id'), 'maintenance_plans', ['organization_id'], unique=False)
    op.create_table('notifications_items',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('recipient_user_id', sa.String(length=36), nullable=True),
    sa.Column('recipient_email', sa.String(length=320), nullable=False),
    sa.Column('channel_id', sa.String(length=36), nullable=True),
    sa.Column('template_id', sa.String(length=36), nullable=True),
    sa.Column('subject', sa.String(length=500), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('priority', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('sender_user_id', sa.String(length=36), nullable=False),
    sa.Column('read_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['channel_id'], ['notifications_channels.id'], name=op.f('fk_notifications_items_channel_id_notifications_channels')),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_notifications_items_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['template_id'], ['notifications_templates.id'], name=op.f('fk_notifications_items_template_id_notifications_templates')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_notifications_items'))
    )
    op.create_index(op.f('ix_notifications_items_channel_id'), 'notifications_items', ['channel_id'], unique=False)
    op.create_index(op.f('ix_notifications_items_organization_id'), 'notifications_items', ['organization_id'], unique=False)
    op.create_index(op.f('ix_notifications_items_recipient_user_id'), 'notifications_items', ['recipient_user_id'], unique=False)
    op.create_index(op.f('ix_notifications_items_status'), 'notifications_items', ['status'], unique=False)
    op.create_index(op.f('ix_notifications_items_template_id'), 'notifications_items', ['template_id'], unique=False)
    op.create_table('spare_parts_stock_movements',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('spare_part_id', sa.String(length=36), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('quantity_change', sa.Integer(), nullable=False),
    sa.Column('quantity_after', sa.Integer(), nullable=False),
    sa.Column('reference', sa.String(length=255), nullable=False),
    sa.Column('actor_email', sa.String(length=320), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_spare_parts_stock_movements_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['spare_part_id'], ['spare_parts.id'], name=op.f('fk_spare_parts_stock_movements_spare_part_id_spare_parts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_spare_parts_stock_movements'))
    )
    op.create_index(op.f('ix_spare_parts_stock_movements_organization_id'), 'spare_parts_stock_movements', ['organization_id'], unique=False)
    op.create_index(op.f('ix_spare_parts_stock_movements_spare_part_id'), 'spare_parts_stock_movements', ['spare_part_id'], unique=False)
    op.create_table('agents_steps',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('instance_id', sa.String(length=36), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['instance_id'], ['agents_instances.id'], name=op.f('fk_agents_steps_instance_id_agents_instances'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_agents_steps_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_agents_steps')),
    sa.UniqueConstraint('instance_id', 'seq', name=op.f('uq_agents_steps_instance_id'))
    )
    op.create_index(op.f('ix_agents_steps_instance_id'), 'agents_steps', ['instance_id'], unique=False)
    op.create_index(op.f('ix_agents_steps_organization_id'), 'agents_steps', ['organization_id'], unique=False)
    op.create_table('claims_claims',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('number', sa.String(length=64), nullable=False),
    sa.Column('payer_id', sa.String(length=36), nullable=False),
    sa.Column('patient_id', sa.String(length=36), nullable=False),
    sa.Column('service_date', sa.Date(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('billed_cents', sa.Integer(), nullable=False),
    sa.Column('approved_cents', sa.Integer(), nullable=False),
    sa.Column('paid_cents', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('denial_reason', sa.String(length=1000), nullable=False),
    sa.Column('notes', sa.Text(), nullable=False),
    sa.Column('submitted_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('decided_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('paid_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_claims_claims_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['patient_id'], ['claims_patients.id'], name=op.f('fk_claims_claims_patient_id_claims_patients')),
    sa.ForeignKeyConstraint(['payer_id'], ['claims_payers.id'], name=op.f('fk_claims_claims_payer_id_claims_payers')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_claims_claims')),
    sa.UniqueConstraint('organization_id', 'number', name=op.f('uq_claims_claims_organization_id'))
    )
    op.create_index(op.f('ix_claims_claims_organization_id'), 'claims_claims', ['organization_id'], unique=False)
    op.create_index(op.f('ix_claims_claims_patient_id'), 'claims_claims', ['patient_id'], unique=False)
    op.create_index(op.f('ix_claims_claims_payer_id'), 'claims_claims', ['payer_id'], unique=False)
    op.create_index(op.f('ix_claims_claims_status'), 'claims_claims', ['status'], unique=False)
    op.create_table('documents_chunks',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('document_id', sa.String(length=36), nullable=False),
    sa.Column('collection_id', sa.String(length=36), nullable=True),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('token_count', sa.Integer(), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['document_id'], ['documents_documents.id'], name=op.f('fk_documents_chunks_document_id_documents_documents'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_documents_chunks_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_documents_chunks')),
    sa.UniqueConstraint('document_id', 'seq', name=op.f('uq_documents_chunks_document_id'))
    )
    op.create_index(op.f('ix_documents_chunks_collection_id'), 'documents_chunks', ['collection_id'], unique=False)
    op.create_index(op.f('ix_documents_chunks_document_id'), 'documents_chunks', ['document_id'], unique=False)
    op.create_index(op.f('ix_documents_chunks_organization_id'), 'documents_chunks', ['organization_id'], unique=False)
    op.create_table('finance_payments',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('invoice_id', sa.String(length=36), nullable=False),
    sa.Column('vendor_id', sa.String(length=36), nullable=False),
    sa.Column('amount_cents', sa.Integer(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('paid_on', sa.Date(), nullable=False),
    sa.Column('method', sa.String(length=16), nullable=False),
    sa.Column('reference', sa.String(length=128), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('void_reason', sa.String(length=1000), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['invoice_id'], ['finance_invoices.id'], name=op.f('fk_finance_payments_invoice_id_finance_invoices')),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_finance_payments_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['vendor_id'], ['finance_vendors.id'], name=op.f('fk_finance_payments_vendor_id_finance_vendors')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_finance_payments'))
    )
    op.create_index(op.f('ix_finance_payments_invoice_id'), 'finance_payments', ['invoice_id'], unique=False)
    op.create_index(op.f('ix_finance_payments_organization_id'), 'finance_payments', ['organization_id'], unique=False)
    op.create_index(op.f('ix_finance_payments_status'), 'finance_payments', ['status'], unique=False)
    op.create_index(op.f('ix_finance_payments_vendor_id'), 'finance_payments', ['vendor_id'], unique=False)
    op.create_table('itsm_ticket_comments',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('ticket_id', sa.String(length=36), nullable=False),
    sa.Column('author_email', sa.String(length=320), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('internal', sa.Boolean(), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_itsm_ticket_comments_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['ticket_id'], ['itsm_tickets.id'], name=op.f('fk_itsm_ticket_comments_ticket_id_itsm_tickets'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_itsm_ticket_comments'))
    )
    op.create_index(op.f('ix_itsm_ticket_comments_organization_id'), 'itsm_ticket_comments', ['organization_id'], unique=False)
    op.create_index(op.f('ix_itsm_ticket_comments_ticket_id'), 'itsm_ticket_comments', ['ticket_id'], unique=False)
    op.create_table('maintenance_work_orders',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('asset_id', sa.String(length=36), nullable=False),
    sa.Column('plan_id', sa.String(length=36), nullable=True),
    sa.Column('title', sa.String(length=255), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('priority', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('assignee_email', sa.String(length=320), nullable=False),
    sa.Column('due_date', sa.Date(), nullable=True),
    sa.Column('resolution', sa.Text(), nullable=False),
    sa.Column('labor_minutes', sa.Integer(), nullable=False),
    sa.Column('parts_cost_cents', sa.Integer(), nullable=False),
    sa.Column('started_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('completed_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['asset_id'], ['maintenance_assets.id'], name=op.f('fk_maintenance_work_orders_asset_id_maintenance_assets')),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_maintenance_work_orders_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['plan_id'], ['maintenance_plans.id'], name=op.f('fk_maintenance_work_orders_plan_id_maintenance_plans')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_maintenance_work_orders'))
    )
    op.create_index(op.f('ix_maintenance_work_orders_asset_id'), 'maintenance_work_orders', ['asset_id'], unique=False)
    op.create_index(op.f('ix_maintenance_work_orders_organization_id'), 'maintenance_work_orders', ['organization_id'], unique=False)
    op.create_index(op.f('ix_maintenance_work_orders_plan_id'), 'maintenance_work_orders', ['plan_id'], unique=False)
    op.create_index(op.f('ix_maintenance_work_orders_status'), 'maintenance_work_orders', ['status'], unique=False)
    op.create_table('claims_claim_lines',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('claim_id', sa.String(length=36), nullable=False),
    sa.Column('procedure_code', sa.String(length=32), nullable=False),
    sa.Column('description', sa.String(length=500), nullable=False),
    sa.Column('quantity', sa.Integer(), nullable=False),
    sa.Column('unit_price_cents', sa.Integer(), nullable=False),
    sa.Column('amount_cents', sa.Integer(), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['claim_id'], ['claims_claims.id'], name=op.f('fk_claims_claim_lines_claim_id_claims_claims'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_claims_claim_lines_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_claims_claim_lines'))
    )
    op.create_index(op.f('ix_claims_claim_lines_claim_id'), 'claims_claim_lines', ['claim_id'], unique=False)
    op.create_index(op.f('ix_claims_claim_lines_organization_id'), 'claims_claim_lines', ['organization_id'], unique=False)
    op.create_table('maintenance_wo_parts',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=False),
    sa.Column('work_order_id', sa.String(length=36), nullable=False),
    sa.Column('spare_part_id', sa.String(length=36), nullable=False),
    sa.Column('quantity', sa.Integer(), nullable=False),
    sa.Column('unit_cost_cents', sa.Integer(), nullable=False),
    sa.Column('amount_cents', sa.Integer(), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_maintenance_wo_parts_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['spare_part_id'], ['spare_parts.id'], name=op.f('fk_maintenance_wo_parts_spare_part_id_spare_parts')),
    sa.ForeignKeyConstraint(['work_order_id'], ['maintenance_work_orders.id'], name=op.f('fk_maintenance_wo_parts_work_order_id_maintenance_work_orders'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_maintenance_wo_parts'))
    )
    op.create_index(op.f('ix_maintenance_wo_parts_organization_id'), 'maintenance_wo_parts', ['organization_id'], unique=False)
    op.create_index(op.f('ix_maintenance_wo_parts_spare_part_id'), 'maintenance_wo_parts', ['spare_part_id'], unique=False)
    op.create_index(op.f('ix_maintenance_wo_parts_work_order_id'), 'maintenance_wo_parts', ['work_order_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_maintenance_wo_parts_work_order_id'), table_name='maintenance_wo_parts')
    op.drop_index(op.f('ix_maintenance_wo_parts_spare_part_id'), table_name='maintenance_wo_parts')
    op.drop_index(op.f('ix_maintenance_wo_parts_organization_id'), table_name='maintenance_wo_parts')
    op.drop_table('maintenance_wo_parts')
    op.drop_index(op.f('ix_claims_claim_lines_organization_id'), table_name='claims_claim_lines')
    op.drop_index(op.f('ix_claims_claim_lines_claim_id'), table_name='claims_claim_lines')
    op.drop_table('claims_claim_lines')
    op.drop_index(op.f('ix_maintenance_work_orders_status'), table_name='maintenance_work_orders')
    op.drop_index(op.f('ix_maintenance_work_orders_plan_id'), table_name='maintenance_work_orders')
    op.drop_index(op.f('ix_maintenance_work_orders_organization_id'), table_name='maintenance_work_orders')
    op.drop_index(op.f('ix_maintenance_work_orders_asset_id'), table_name='maintenance_work_orders')
    op.drop_table('maintenance_work_orders')
    op.drop_index(op.f('ix_itsm_ticket_comments_ticket_id'), table_name='itsm_ticket_comments')
    op.drop_index(op.f('ix_itsm_ticket_comments_organization_id'), table_name='itsm_ticket_comments')
    op.drop_table('itsm_ticket_comments')
    op.drop_index(op.f('ix_finance_payments_vendor_id'), table_name='finance_payments')
    op.drop_index(op.f('ix_finance_payments_status'), table_name='finance_payments')
    op.drop_index(op.f('ix_finance_payments_organization_id'), table_name='finance_payments')
    op.drop_index(op.f('ix_finance_payments_invoice_id'), table_name='finance_payments')
    op.drop_table('finance_payments')
    op.drop_index(op.f('ix_documents_chunks_organization_id'), table_name='documents_chunks')
    op.drop_index(op.f('ix_documents_chunks_document_id'), table_name='documents_chunks')
    op.drop_index(op.f('ix_documents_chunks_collection_id'), table_name='documents_chunks')
    op.drop_table('documents_chunks')
    op.drop_index(op.f('ix_claims_claims_status'), table_name='claims_claims')
    op.drop_index(op.f('ix_claims_claims_payer_id'), table_name='claims_claims')
    op.drop_index(op.f('ix_claims_claims_patient_id'), table_name='claims_claims')
    op.drop_index(op.f('ix_claims_claims_organization_id'), table_name='claims_claims')
    op.drop_table('claims_claims')
    op.drop_index(op.f('ix_agents_steps_organization_id'), table_name='agents_steps')
    op.drop_index(op.f('ix_agents_steps_instance_id'), table_name='agents_steps')
    op.drop_table('agents_steps')
    op.drop_index(op.f('ix_spare_parts_stock_movements_spare_part_id'), table_name='spare_parts_stock_movements')
    op.drop_index(op.f('ix_spare_parts_stock_movements_organization_id'), table_name='spare_parts_stock_movements')
    op.drop_table('spare_parts_stock_movements')
    op.drop_index(op.f('ix_notifications_items_template_id'), table_name='notifications_items')
    op.drop_index(op.f('ix_notifications_items_status'), table_name='notifications_items')
    op.drop_index(op.f('ix_notifications_items_recipient_user_id'), table_name='notifications_items')
    op.drop_index(op.f('ix_notifications_items_organization_id'), table_name='notifications_items')
    op.drop_index(op.f('ix_notifications_items_channel_id'), table_name='notifications_items')
    op.drop_table('notifications_items')
    op.drop_index(op.f('ix_maintenance_plans_organization_id'), table_name='maintenance_plans')
    op.drop_index(op.f('ix_maintenance_plans_asset_id'), table_name='maintenance_plans')
    op.drop_table('maintenance_plans')
    op.drop_index(op.f('ix_maintenance_meter_readings_organization_id'), table_name='maintenance_meter_readings')
    op.drop_index(op.f('ix_maintenance_meter_readings_asset_id'), table_name='maintenance_meter_readings')
    op.drop_table('maintenance_meter_readings')
    op.drop_index(op.f('ix_itsm_tickets_status'), table_name='itsm_tickets')
    op.drop_index(op.f('ix_itsm_tickets_service_id'), table_name='itsm_tickets')
    op.drop_index(op.f('ix_itsm_tickets_organization_id'), table_name='itsm_tickets')
    op.drop_index(op.f('ix_itsm_tickets_assignee_email'), table_name='itsm_tickets')
    op.drop_table('itsm_tickets')
    op.drop_index(op.f('ix_integrations_call_logs_organization_id'), table_name='integrations_call_logs')
    op.drop_index(op.f('ix_integrations_call_logs_endpoint_id'), table_name='integrations_call_logs')
    op.drop_table('integrations_call_logs')
    op.drop_index(op.f('ix_finance_purchase_orders_vendor_id'), table_name='finance_purchase_orders')
    op.drop_index(op.f('ix_finance_purchase_orders_status'), table_name='finance_purchase_orders')
    op.drop_index(op.f('ix_finance_purchase_orders_organization_id'), table_name='finance_purchase_orders')
    op.drop_table('finance_purchase_orders')
    op.drop_index(op.f('ix_documents_documents_status'), table_name='documents_documents')
    op.drop_index(op.f('ix_documents_documents_sha256'), table_name='documents_documents')
    op.drop_index(op.f('ix_documents_documents_organization_id'), table_name='documents_documents')
    op.drop_index(op.f('ix_documents_documents_collection_id'), table_name='documents_documents')
    op.drop_table('documents_documents')
    op.drop_index(op.f('ix_claims_patients_status'), table_name='claims_patients')
    op.drop_index(op.f('ix_claims_patients_payer_id'), table_name='claims_patients')
    op.drop_index(op.f('ix_claims_patients_organization_id'), table_name='claims_patients')
    op.drop_table('claims_patients')
    op.drop_index(op.f('ix_agents_instances_status'), table_name='agents_instances')
    op.drop_index(op.f('ix_agents_instances_organization_id'), table_name='agents_instances')
    op.drop_index(op.f('ix_agents_instances_agent_id'), table_name='agents_instances')
    op.drop_table('agents_instances')
    op.drop_index(op.f('ix_notifications_templates_status'), table_name='notifications_templates')
    op.drop_index(op.f('ix_notifications_templates_organization_id'), table_name='notifications_templates')
    op.drop_table('notifications_templates')
    op.drop_index(op.f('ix_notifications_channels_status'), table_name='notifications_channels')
    op.drop_index(op.f('ix_notifications_channels_organization_id'), table_name='notifications_channels')
    op.drop_table('notifications_channels')
    op.drop_index(op.f('ix_maintenance_assets_status'), table_name='maintenance_assets')
    op.drop_index(op.f('ix_maintenance_assets_organization_id'), table_name='maintenance_assets')
    op.drop_table('maintenance_assets')
    op.drop_index(op.f('ix_itsm_sla_policies_organization_id'), table_name='itsm_sla_policies')
    op.drop_table('itsm_sla_policies')
    op.drop_index(op.f('ix_itsm_services_status'), table_name='itsm_services')
    op.drop_index(op.f('ix_itsm_services_organization_id'), table_name='itsm_services')
    op.drop_table('itsm_services')
    op.drop_index(op.f('ix_integrations_endpoints_status'), table_name='integrations_endpoints')
    op.drop_index(op.f('ix_integrations_endpoints_organization_id'), table_name='integrations_endpoints')
    op.drop_table('integrations_endpoints')
    op.drop_index(op.f('ix_documents_collections_organization_id'), table_name='documents_collections')
    op.drop_table('documents_collections')
    op.drop_index(op.f('ix_claims_payers_status'), table_name='claims_payers')
    op.drop_index(op.f('ix_claims_payers_organization_id'), table_name='claims_payers')
    op.drop_table('claims_payers')
    op.drop_index(op.f('ix_agents_agents_status'), table_name='agents_agents')
    op.drop_index(op.f('ix_agents_agents_organization_id'), table_name='agents_agents')
    op.drop_table('agents_agents')
