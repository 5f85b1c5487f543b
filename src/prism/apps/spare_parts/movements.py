"""The one way a spare part's stock changes: with a movement row that keeps the quantity after it.

A part's creation with stock (an `opening` movement), the stock actions, a spare part's update of its quantity
and the parts issued to (and returned from) work orders all go through `move_stock`, so the movements of a part
always add up to its history, and their changes to its quantity.
"""

from __future__ import annotations

from prism.apps.crud import repo
from prism.apps.spare_parts.models import SparePart, StockMovement
from prism.errors import Conflict
from prism.registry import HandlerCall

MAX_UNITS = 10_000_000  # of one part in stock, as a part is created with at most
OPENING = "opening"  # the kind of the movement of the stock a part is created with


async def move_stock(call: HandlerCall, part: SparePart, kind: str, change: int, reference: str) -> StockMovement:
    """Change `part`'s stock by `change` units and record it; callers check stock suffices for an issue."""
    if part.quantity + change > MAX_UNITS:
        raise Conflict(f"{part.sku} would hold {part.quantity + change:,} units, over the {MAX_UNITS:,} a part may "
                       "hold", details={"on_hand": part.quantity})
    part.quantity += change
    movement: StockMovement = repo(call, StockMovement, "stock_movement").add(
        spare_part_id=part.id, kind=kind, quantity_change=change, quantity_after=part.quantity,
        reference=reference, actor_email=call.auth.user_email)
    await call.session.flush()
    return movement
