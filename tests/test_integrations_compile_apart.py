"""An OpenAPI description imported through the API is compiled in a child process (prism.integrations.compiling):
the serving process spends no CPU on it, and a compilation past its time or memory is stopped and refused."""

from __future__ import annotations

import asyncio
import functools
import gc
import multiprocessing
import os
import signal
import time
import uuid

import httpx
import pytest
import yaml

from prism.errors import InvalidArguments
from prism.integrations import compiling
from prism.integrations.compiling import ImportBusy, ServerStopping, compile_apart
from prism.integrations.openapi import SpecError
from prism.integrations.service import compile_openapi
from tests.description_server import (  # noqa: F401 -- fixtures: descriptions served over HTTPS on loopback
    Descriptions,
    descriptions_fixture,
    upstream_tls_fixture,
)
from tests.factories import Factory
from tests.governance_support import post

IMPORT = "config_manage/integrations/integration/importOpenapi"
pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


@functools.cache
def _large_description(schemas: int) -> str:
    """One operation and `schemas` unused schemas: reading the YAML is nearly all of its compilation."""
    document = {
        "openapi": "3.0.3", "info": {"title": "Large", "version": "1"},
        "paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}}},
        "components": {"schemas": {f"S{i}": {"type": "object", "description": "a schema nobody uses " * 4,
                                             "properties": {f"p{j}": {"type": "string", "maxLength": j}
                                                            for j in range(12)}}
                                   for i in range(schemas)}}}
    return yaml.dump(document, Dumper=yaml.CSafeDumper)


def _running_compilers() -> list[multiprocessing.process.BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.name == "prism-openapi-compile"]


async def test_an_import_costs_the_serving_process_no_cpu_for_compiling(
        client: httpx.AsyncClient, factory: Factory, descriptions: Descriptions) -> None:
    """Compiled on a thread, a description's compilation held the interpreter lock of the process serving every
    organization: the process's own CPU during the import was the compilation's. In a child, the serving process
    only waits. (By URL: a description given inline is at most the request's 1 MB.)"""
    text = _large_description(1500)
    descriptions.files["large.yaml"] = text
    started = time.process_time()
    compile_openapi(text)
    compiling_here = time.process_time() - started
    assert compiling_here > 0.5, compiling_here  # large enough to tell the two apart

    ws = await factory.workspace(roles=("owner",))
    await post(client, ws, IMPORT, {"name": "warm_" + uuid.uuid4().hex[:8], "spec": _large_description(1)})
    # What the suite's process already holds (a thousand tests' registries, caches, clients) is frozen out of the
    # collector's reach meanwhile: a full collection of it falling inside the window would count as the import's
    # CPU (in one CI run 0.81 s against 1.73 s of compiling, where alone it is a small part).
    gc.collect()
    gc.freeze()
    try:
        started = time.process_time()
        imported = await post(client, ws, IMPORT, {"name": "large_" + uuid.uuid4().hex[:8],
                                                   "url": descriptions.url("large.yaml")})
        serving_cpu = time.process_time() - started
    finally:
        gc.unfreeze()
    assert imported.status_code == 200, imported.text
    assert imported.json()["data"]["handlers"] == 1
    assert serving_cpu < 0.4 * compiling_here, (serving_cpu, compiling_here)


async def test_a_compilation_past_its_time_is_stopped_and_refused() -> None:
    text = _large_description(1500)
    started = time.monotonic()
    with pytest.raises(SpecError) as refused:
        await compile_apart(text, default_cost=1, seconds=0.2, memory_mb=2048)
    assert time.monotonic() - started < 5
    assert refused.value.status == 400 and refused.value.code == "invalid_openapi"
    assert refused.value.message == "spec: compiling the description took longer than 0.2 s"
    assert _running_compilers() == []
    # Its place is free again: a small description compiles.
    compiled = await compile_apart(_large_description(1), default_cost=1, seconds=60, memory_mb=2048)
    assert [op["operation"] for op in compiled.operations] == ["ping"]


async def test_a_compilation_past_its_memory_is_refused() -> None:
    """The cap is beyond the address space the child starts with; reading 1.3 MB of YAML into objects needs more
    than 16 MB."""
    with pytest.raises(SpecError) as refused:
        await compile_apart(_large_description(1500), default_cost=1, seconds=60, memory_mb=16)
    assert refused.value.message == "spec: compiling the description needs more than 16 MB", refused.value.message
    assert _running_compilers() == []


async def test_a_child_that_ends_without_an_answer_is_a_refusal_naming_its_exit() -> None:
    compiling_task = asyncio.create_task(
        compile_apart(_large_description(1500), default_cost=1, seconds=60, memory_mb=2048))
    while not _running_compilers():  # noqa: ASYNC110 -- a child process sets no event here
        await asyncio.sleep(0.01)
    pid = _running_compilers()[0].pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(SpecError) as refused:
        await compiling_task
    assert refused.value.message == ("spec: the description could not be compiled (the process compiling it ended "
                                     "with exit code -9)")


async def test_what_the_compiler_refuses_crosses_the_process_whole() -> None:
    """Its class, code, status, message and details, as when it was compiled in the serving process."""
    nothing = "openapi: 3.0.3\ninfo: {title: x, version: '1'}\npaths: {/x: {summary: no operation}}\n"
    with pytest.raises(InvalidArguments) as here:
        compile_openapi(nothing)
    with pytest.raises(InvalidArguments) as apart:
        await compile_apart(nothing, default_cost=1, seconds=60, memory_mb=2048)
    assert type(apart.value) is type(here.value)
    assert (apart.value.code, apart.value.status, apart.value.message, apart.value.details) == \
        (here.value.code, here.value.status, here.value.message, here.value.details)


async def test_compilations_beyond_the_limit_at_once_are_refused_busy() -> None:
    slow = _large_description(1500)
    running = [asyncio.create_task(compile_apart(slow, default_cost=1, seconds=0.2, memory_mb=2048))
               for _ in range(compiling.MAX_COMPILES_AT_ONCE)]
    await asyncio.sleep(0)  # each has taken its place
    with pytest.raises(ImportBusy) as busy:
        await compile_apart(slow, default_cost=1, seconds=60, memory_mb=2048)
    assert busy.value.status == 503 and busy.value.code == "import_busy"
    for task in running:  # stopped at their time, their places given back
        with pytest.raises(SpecError):
            await task
    assert len((await compile_apart(_large_description(1), default_cost=1, seconds=60, memory_mb=2048))
               .operations) == 1


async def test_a_cancelled_import_stops_its_child_and_frees_its_place() -> None:
    """A request given up (its client went away) must not leave a compilation running, nor its place taken."""
    compiling_task = asyncio.create_task(
        compile_apart(_large_description(1500), default_cost=1, seconds=60, memory_mb=2048))
    while not _running_compilers():  # noqa: ASYNC110 -- a child process sets no event here
        await asyncio.sleep(0.01)
    compiling_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await compiling_task
    deadline = time.monotonic() + 1  # the thread watching it looks every STOP_CHECK_SECONDS
    while _running_compilers() and time.monotonic() < deadline:  # noqa: ASYNC110 -- a child process sets no event
        await asyncio.sleep(0.02)
    assert _running_compilers() == []
    await asyncio.sleep(0.2)  # its place is given back once it is reaped
    small = _large_description(1)
    answers = await asyncio.gather(*(compile_apart(small, default_cost=1, seconds=60, memory_mb=2048)
                                     for _ in range(compiling.MAX_COMPILES_AT_ONCE)))  # not refused busy
    assert [len(a.operations) for a in answers] == [1] * compiling.MAX_COMPILES_AT_ONCE


async def test_an_import_given_up_while_its_child_starts_still_has_its_child_stopped() -> None:
    """Given up before its child even started (the start cannot be interrupted): the child is still killed as
    soon as it has started, and the place is not given back before that, so giving imports up early cannot run
    more compilations than the limit, nor any past its time."""
    await compile_apart(_large_description(1), default_cost=1, seconds=60, memory_mb=2048)  # the forkserver is up
    slow = _large_description(4000)
    given_up = [asyncio.create_task(compile_apart(slow, default_cost=1, seconds=60, memory_mb=2048))
                for _ in range(compiling.MAX_COMPILES_AT_ONCE)]
    await asyncio.sleep(0)  # each has taken its place and is starting its child
    for task in given_up:
        task.cancel()
    await asyncio.gather(*given_up, return_exceptions=True)  # their requests have given up
    with pytest.raises(ImportBusy):  # their places are still taken until their children are gone
        await compile_apart(_large_description(1), default_cost=1, seconds=60, memory_mb=2048)
    deadline = time.monotonic() + 3  # a start, then at most a check's interval
    while _running_compilers() and time.monotonic() < deadline:  # noqa: ASYNC110 -- a child process sets no event
        await asyncio.sleep(0.02)
    assert _running_compilers() == []
    await asyncio.sleep(0.2)  # the threads watching them give their places back after reaping them
    small = _large_description(1)
    answers = await asyncio.gather(*(compile_apart(small, default_cost=1, seconds=60, memory_mb=2048)
                                     for _ in range(compiling.MAX_COMPILES_AT_ONCE)))
    assert [len(a.operations) for a in answers] == [1] * compiling.MAX_COMPILES_AT_ONCE


async def test_a_compilation_running_when_the_process_is_told_to_stop_is_killed_at_once() -> None:
    """`stop_all` (`prism serve` told to stop): the child is killed within a check's interval, its import refused
    503 `server_stopping`, its place freed; imports that start afterwards compile as usual."""
    compiling_task = asyncio.create_task(
        compile_apart(_large_description(4000), default_cost=1, seconds=60, memory_mb=2048))
    while not _running_compilers():  # noqa: ASYNC110 -- a child process sets no event here
        await asyncio.sleep(0.01)
    started = time.monotonic()
    compiling.stop_all()
    with pytest.raises(ServerStopping) as stopped:
        await compiling_task
    assert time.monotonic() - started < 1
    assert stopped.value.status == 503 and stopped.value.code == "server_stopping"
    assert _running_compilers() == []  # reaped before the answer
    small = _large_description(1)
    answers = await asyncio.gather(*(compile_apart(small, default_cost=1, seconds=60, memory_mb=2048)
                                     for _ in range(compiling.MAX_COMPILES_AT_ONCE)))  # not refused busy
    assert [len(a.operations) for a in answers] == [1] * compiling.MAX_COMPILES_AT_ONCE
