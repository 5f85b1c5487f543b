"""Declaring handlers stays cheap at start-up, and what the doors publish and enforce is unchanged."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from bench.synthetic_app import SHAPES
from pydantic import BaseModel, Field, ValidationError, create_model

from prism.apps.params import ListParams
from prism.kit import collector
from prism.kit.collector import building_long_lived, collector_paused, pause_until_serving, start_serving
from prism.registry import HandlerApp, HandlerCall, Params
from prism.registry.registry import Registry, _clean_schema, build_registry


def _pydantic_schema(model: type[BaseModel]) -> str:
    return json.dumps(_clean_schema(model.model_json_schema()))


def test_every_published_handler_schema_is_byte_for_byte_pydantics() -> None:
    registry = build_registry()
    differing = [h.path for h in registry if json.dumps(h.schema) != _pydantic_schema(h.params)]
    assert len(registry) > 300 and differing == []


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_benchmark_shapes_publish_pydantics_bytes(shape: str) -> None:
    model = create_model(f"Shape{shape.title()}Params", __base__=Params, **SHAPES[shape])
    app = HandlerApp("shapes")
    app.handler("entity_crud", "thing", "read", params=model, scope="read", description="d")(_echo)
    registry = Registry()
    registry.add_app(app)
    (handler,) = registry.freeze()
    assert json.dumps(handler.schema) == _pydantic_schema(model)


async def _echo(call: HandlerCall, params: Any) -> dict[str, Any]:
    return {}


def test_a_parameter_model_builds_its_validator_on_first_use_not_at_declaration_or_registry_build() -> None:
    class LateParams(Params):
        code: str = Field(..., min_length=2, max_length=8)
        quantity: int = Field(1, ge=1)

    assert not LateParams.__pydantic_complete__
    app = HandlerApp("late")
    app.handler("entity_crud", "thing", "create", params=LateParams, scope="write", description="d")(_echo)
    registry = Registry()
    registry.add_app(app)
    registry.freeze()
    assert not LateParams.__pydantic_complete__, "publishing the schema must not build the validator"
    assert LateParams.model_validate({"code": "AB"}).quantity == 1
    assert LateParams.__pydantic_complete__


def test_the_public_parameter_base_refuses_unknown_and_invalid_arguments_by_field() -> None:
    assert issubclass(ListParams, Params)
    with pytest.raises(ValidationError) as unknown:
        ListParams.model_validate({"pag": 2})
    assert unknown.value.errors()[0]["loc"] == ("pag",)
    with pytest.raises(ValidationError) as invalid:
        ListParams.model_validate({"page_size": 1000})
    assert invalid.value.errors()[0]["loc"] == ("page_size",)


def test_the_collector_is_paused_inside_and_restored_after_even_when_nested() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "an inner block leaves the outer one in charge"
    assert gc.isenabled()


def test_blocks_that_overlap_across_threads_resume_the_collector_only_when_the_last_ends() -> None:
    import threading

    entered, leave = threading.Event(), threading.Event()

    def worker() -> None:  # an index built on a worker thread while a refresh runs on the event loop
        with collector_paused():
            entered.set()
            leave.wait(timeout=10)

    thread = threading.Thread(target=worker)
    thread.start()
    entered.wait(timeout=10)
    with collector_paused():
        leave.set()
        thread.join()
        assert not gc.isenabled(), "the worker's block ended first: this one still pauses the collector"
    assert gc.isenabled()


def test_in_a_server_a_long_lived_build_pauses_the_collector_and_is_frozen_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector, "_server_process", True)  # as `prism serve` sets it
    try:
        with building_long_lived():
            assert not gc.isenabled()
            built = [{"handler": n} for n in range(1000)]  # what a registry refresh builds
        assert gc.isenabled()
        assert all(o is not built for o in gc.get_objects()), "frozen: no full collection walks it again"
    finally:
        gc.unfreeze()


def test_elsewhere_a_long_lived_build_leaves_the_collector_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector, "_server_process", False)  # tests, or an app embedded in another program
    frozen = gc.get_freeze_count()
    with building_long_lived():
        assert gc.isenabled()
        built = [{"handler": n} for n in range(1000)]
    assert gc.get_freeze_count() == frozen and any(o is built for o in gc.get_objects())


def test_a_collector_disabled_by_the_embedding_process_stays_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_server_start_up_pauses_the_collector_until_it_starts_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector, "_server_process", False)  # start_serving sets it: back to a test process after
    try:
        pause_until_serving()
        assert not gc.isenabled()
        with collector_paused():
            pass
        assert not gc.isenabled(), "blocks inside the server's start-up do not end its pause"
        start_serving()
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0, "what start-up built is out of the collector's reach"
    finally:
        gc.enable()
        gc.unfreeze()


def test_starting_to_serve_leaves_a_collector_it_did_not_pause_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector, "_server_process", False)
    gc.disable()
    try:
        start_serving()
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()
