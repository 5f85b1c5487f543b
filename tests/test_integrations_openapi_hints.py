"""What an imported operation says about itself: read-only from GET, destructive from DELETE or from a write whose
name says an act that cannot be undone, as built-in handlers declare it (MCP clients confirm by these hints)."""

from __future__ import annotations

from typing import Any

import pytest

from prism.integrations.openapi import compile_document

pytestmark = pytest.mark.engine_independent


def _operation(operation_id: str) -> dict[str, Any]:
    return {"operationId": operation_id, "responses": {"200": {"description": "ok"}}}


ORDERS = {
    "openapi": "3.0.3", "info": {"title": "Orders", "version": "1"},
    "paths": {
        "/orders": {"get": _operation("listOrders"), "post": _operation("createOrder")},
        "/orders/{id}": {"delete": _operation("deleteOrder"), "patch": _operation("updateOrder"),
                         "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]},
        "/orders/{id}/cancel": {"post": _operation("cancelOrder"),
                                "parameters": [{"name": "id", "in": "path", "required": True,
                                                "schema": {"type": "string"}}]},
        "/orders/{id}/cancellation-terms": {"get": _operation("getCancelTerms"),
                                            "parameters": [{"name": "id", "in": "path", "required": True,
                                                            "schema": {"type": "string"}}]},
    },
}


def test_a_write_named_for_an_act_that_cannot_be_undone_is_destructive_like_a_delete() -> None:
    hints = {op["operation_id"]: (op["read_only"], op["destructive"])
             for op in compile_document(ORDERS).operations}
    assert hints == {
        "listOrders": (True, False), "getCancelTerms": (True, False),  # reads never are, whatever their words
        "createOrder": (False, False), "updateOrder": (False, False),
        "deleteOrder": (False, True), "cancelOrder": (False, True),
    }
