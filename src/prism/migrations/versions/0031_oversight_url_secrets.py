"""oversight url secrets: a held call's stored arguments have their URL keys withheld, as new ones do

An oversight request keeps the held call's arguments for its reviewers with each secret masked
(prism.governance.oversight.as_reviewers_see): a `writeOnly` field whole, and now also a URL field marked
`x-prism-url-secrets` with its query values and userinfo withheld and an endpoint call's `query` (marked
`x-prism-query-secrets`) with each value withheld. Requests stored before kept those in the clear; here they are
masked by the same rule, with the handlers of the registry Prism runs with (a request whose coordinate names no
handler any more is left as it is). Rows are read in batches by id; masking what is masked changes nothing, so
running it again does too. The digest is not touched: the approval stays bound to the arguments as sent, which the
caller sends again.

Stepping down changes nothing: the withheld values are not kept anywhere, by design, so they cannot be put back.

Revision ID: 0031_oversight_url_secrets
Revises: 0030_spare_parts_opening_stock
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa
from alembic import context, op

from prism.config import Settings, get_settings

if TYPE_CHECKING:
    from prism.registry.registry import Registry

revision: str = "0031_oversight_url_secrets"
down_revision: str | None = "0030_spare_parts_opening_stock"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 500
requests = sa.table("oversight_requests", sa.column("id", sa.String), sa.column("coordinate", sa.String),
                    sa.column("arguments", sa.JSON))


def _registry() -> "Registry":
    """The handlers Prism runs with (its settings' extra apps too; a test may hand its settings to Alembic's
    config): their parameter schemas say which fields carry a secret."""
    from prism.registry.registry import build_registry

    given = context.config.attributes.get("settings")
    settings = given if isinstance(given, Settings) else get_settings()
    return build_registry(s for s in settings.apps.split(",") if s.strip())


def upgrade() -> None:
    from prism.governance.oversight import as_reviewers_see

    connection = op.get_bind()
    registry: Registry | None = None  # built (about a second) only when a request keeps arguments
    after = ""
    while True:
        batch = connection.execute(sa.select(requests).where(requests.c.id > after, requests.c.arguments.is_not(None))
                                   .order_by(requests.c.id).limit(BATCH)).all()
        if not batch:
            return
        registry = registry or _registry()
        for row in batch:
            shown = as_reviewers_see(registry.get_path(row.coordinate), row.arguments)
            if shown is not None and shown != row.arguments:
                connection.execute(requests.update().where(requests.c.id == row.id).values(arguments=shown))
        after = batch[-1].id


def downgrade() -> None:
    """Nothing to do: the values the upgrade withheld are kept nowhere, so the arguments stay masked."""
