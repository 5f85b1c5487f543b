"""Client input checked against a Pydantic model, refused in the one 400 shape (prism.errors.problem_details)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from prism.errors import InvalidArguments

M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: Any, *, whole: str = "arguments") -> M:
    """`data` as `model`, or InvalidArguments listing every problem; `whole` names the input as a whole (the
    field a problem of no one field names, and what must be a JSON object: `null` is not one)."""
    if not isinstance(data, dict):
        raise InvalidArguments(f"{whole}: must be a JSON object", field=whole)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [{"field": ".".join(str(p) for p in e["loc"]) or whole,
                     "message": e["msg"].removeprefix("Value error, ")}
                    for e in exc.errors(include_url=False, include_input=False)]
        raise InvalidArguments("; ".join(f"{p['field']}: {p['message']}" for p in problems),
                               details={"errors": problems}) from None
