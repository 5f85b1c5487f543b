"""oauth authorization server: clients, signing keys, codes, grants, refresh tokens

Revision ID: 0003_oauth
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import prism.models.base

revision: str = "0003_oauth"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('oauth_clients',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('client_id', sa.String(length=128), nullable=False),
    sa.Column('client_name', sa.String(length=255), nullable=False),
    sa.Column('redirect_uris', sa.JSON(), nullable=False),
    sa.Column('grant_types', sa.JSON(), nullable=False),
    sa.Column('response_types', sa.JSON(), nullable=False),
    sa.Column('token_endpoint_auth_method', sa.String(length=32), nullable=False),
    sa.Column('scope', sa.Text(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=False),
    sa.Column('secret_hash', sa.String(length=64), nullable=True),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_oauth_clients')),
    sa.UniqueConstraint('client_id', name=op.f('uq_oauth_clients_client_id'))
    )
    op.create_index(op.f('ix_oauth_clients_fingerprint'), 'oauth_clients', ['fingerprint'], unique=False)
    op.create_table('oauth_signing_keys',
    sa.Column('kid', sa.String(length=64), nullable=False),
    sa.Column('public_jwk', sa.JSON(), nullable=False),
    sa.Column('private_key_encrypted', sa.Text(), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('retired_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('kid', name=op.f('pk_oauth_signing_keys'))
    )
    op.create_table('oauth_codes',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('code_hash', sa.String(length=64), nullable=False),
    sa.Column('client_id', sa.String(length=128), nullable=False),
    sa.Column('user_id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=True),
    sa.Column('redirect_uri', sa.Text(), nullable=False),
    sa.Column('redirect_uri_sent', sa.Boolean(), nullable=False),
    sa.Column('code_challenge', sa.String(length=128), nullable=False),
    sa.Column('scope', sa.Text(), nullable=False),
    sa.Column('issuer', sa.String(length=512), nullable=False),
    sa.Column('audience', sa.String(length=512), nullable=False),
    sa.Column('expires_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('used_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('grant_id', sa.String(length=36), nullable=True),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_oauth_codes_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_oauth_codes_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_oauth_codes')),
    sa.UniqueConstraint('code_hash', name=op.f('uq_oauth_codes_code_hash'))
    )
    op.create_index(op.f('ix_oauth_codes_user_id'), 'oauth_codes', ['user_id'], unique=False)
    op.create_table('oauth_grants',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('client_id', sa.String(length=128), nullable=False),
    sa.Column('user_id', sa.String(length=36), nullable=False),
    sa.Column('organization_id', sa.String(length=36), nullable=True),
    sa.Column('scope', sa.Text(), nullable=False),
    sa.Column('issuer', sa.String(length=512), nullable=False),
    sa.Column('audience', sa.String(length=512), nullable=False),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_oauth_grants_organization_id_organizations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_oauth_grants_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_oauth_grants'))
    )
    op.create_index(op.f('ix_oauth_grants_client_id'), 'oauth_grants', ['client_id'], unique=False)
    op.create_index(op.f('ix_oauth_grants_user_id'), 'oauth_grants', ['user_id'], unique=False)
    op.create_table('oauth_refresh_tokens',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('grant_id', sa.String(length=36), nullable=False),
    sa.Column('expires_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('used_at', prism.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', prism.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['grant_id'], ['oauth_grants.id'], name=op.f('fk_oauth_refresh_tokens_grant_id_oauth_grants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_oauth_refresh_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_oauth_refresh_tokens_token_hash'))
    )
    op.create_index('ix_oauth_refresh_tokens_grant', 'oauth_refresh_tokens', ['grant_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_oauth_refresh_tokens_grant', table_name='oauth_refresh_tokens')
    op.drop_table('oauth_refresh_tokens')
    op.drop_index(op.f('ix_oauth_grants_user_id'), table_name='oauth_grants')
    op.drop_index(op.f('ix_oauth_grants_client_id'), table_name='oauth_grants')
    op.drop_table('oauth_grants')
    op.drop_index(op.f('ix_oauth_codes_user_id'), table_name='oauth_codes')
    op.drop_table('oauth_codes')
    op.drop_table('oauth_signing_keys')
    op.drop_index(op.f('ix_oauth_clients_fingerprint'), table_name='oauth_clients')
    op.drop_table('oauth_clients')
