"""Shipping quotes as Prism handlers.

Declared once here; Prism gives them RBAC (`shipping.view_rate`), scopes, audit, every door and a
place in introspection without any further code.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from prism.registry import HandlerApp, HandlerCall, Params

# What people ask of each handler in their own words: capability search reads them besides the description.
EXAMPLES = {
    "report_query/shipping/rate/quote": (
        "How much to ship a 2 kg parcel within the country?",
        "Quote express shipping for a 5.5 kg box to Europe",
        "What's the postage on a 12 kg box going overseas, standard service?",
        "price check: 0.8 kg package to France",
        "shipping rate for 3 kilos worldwide, express vs normal?",
        "what would it cost to send a 20 kg parcel abroad next-day",
    ),
}

app = HandlerApp("shipping", description="Parcel shipping: zone-based rate quotes.", examples=EXAMPLES)

Zone = Literal["domestic", "europe", "world"]
BASE_CENTS: dict[str, int] = {"domestic": 590, "europe": 1490, "world": 2990}
PER_KG_CENTS: dict[str, int] = {"domestic": 120, "europe": 380, "world": 760}
EXPRESS_FACTOR = 1.8


class QuoteParams(Params):
    weight_kg: float = Field(..., gt=0, le=70, description="Parcel weight in kilograms (max 70).")
    zone: Zone = Field(..., description="Destination zone.")
    express: bool = Field(False, description="Next-day service.")


@app.handler("report_query", "rate", "quote", params=QuoteParams, scope="read",
             description="Quote the price of shipping one parcel by weight and destination zone.",
             keywords=("shipping cost", "parcel price", "postage", "delivery quote"))
async def quote(call: HandlerCall, p: QuoteParams) -> dict[str, Any]:
    # Carriers bill each started kilogram.
    billable_kg = int(-(-p.weight_kg // 1))
    cents = BASE_CENTS[p.zone] + PER_KG_CENTS[p.zone] * billable_kg
    if p.express:
        cents = round(cents * EXPRESS_FACTOR)
    return {"zone": p.zone, "billable_kg": billable_kg, "express": p.express, "price_cents": cents,
            "currency": "EUR"}
