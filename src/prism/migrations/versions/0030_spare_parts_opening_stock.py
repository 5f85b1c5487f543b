"""spare parts opening movements: the stock a part was created with is a movement of its own

A spare part created with stock records it as an `opening` movement, so that a part's movements add up to its
quantity. Parts stored before get theirs here: their quantity less the changes of their movements, when that is
not zero, dated at the part's creation (the quantity after it is that stock). Stepping down deletes the opening
movements, which the code before knows nothing of.

Revision ID: 0030_spare_parts_opening_stock
Revises: 0029_endpoint_url_secrets
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from prism.kit.ids import new_id
from prism.models.base import UTCDateTime

revision: str = "0030_spare_parts_opening_stock"
down_revision: str | None = "0029_endpoint_url_secrets"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPENING = "opening"
parts = sa.table("spare_parts", sa.column("id", sa.String), sa.column("organization_id", sa.String),
                 sa.column("quantity", sa.Integer), sa.column("created_at", UTCDateTime()))
movements = sa.table("spare_parts_stock_movements", sa.column("id", sa.String),
                     sa.column("organization_id", sa.String), sa.column("spare_part_id", sa.String),
                     sa.column("kind", sa.String), sa.column("quantity_change", sa.Integer),
                     sa.column("quantity_after", sa.Integer), sa.column("reference", sa.String),
                     sa.column("actor_email", sa.String), sa.column("created_at", UTCDateTime()))


def upgrade() -> None:
    from prism.apps.sums import exact_sum, joined

    connection = op.get_bind()
    moved = {part_id: joined(high, low) for part_id, high, low in connection.execute(
        sa.select(movements.c.spare_part_id, *exact_sum(movements.c.quantity_change))
        .group_by(movements.c.spare_part_id))}
    for part in connection.execute(sa.select(parts).order_by(parts.c.created_at, parts.c.id)).all():
        opening = part.quantity - moved.get(part.id, 0)
        if opening:
            connection.execute(movements.insert().values(
                id=new_id(), organization_id=part.organization_id, spare_part_id=part.id, kind=OPENING,
                quantity_change=opening, quantity_after=opening, reference="spare_part/create", actor_email="",
                created_at=part.created_at))


def downgrade() -> None:
    op.get_bind().execute(movements.delete().where(movements.c.kind == OPENING))
