"""Traces (OpenTelemetry, the optional extra `prism[otel]`): a span per request and per dispatch stage.

Off unless `PRISM_TRACING=otel`. Spans go to the tracer provider the deployment configures for the process
(the OpenTelemetry SDK's, e.g. through `opentelemetry-instrument` and its `OTEL_*` environment); a W3C
`traceparent` header on a request makes its span a child of the caller's. A governance decision's `trace_id`
is its request's trace id, so a decision leads to its trace.

Off, every helper here returns the one shared no-op context: a call pays an attribute read, nothing else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from prism.errors import PrismError

NO_SPAN: AbstractContextManager[Any] = contextlib.nullcontext()


class _Tracer:
    """What the edge and the dispatcher ask for; `active` is None until `enable` is called with the extra there."""

    active: Any = None

    def enable(self) -> None:
        try:
            from opentelemetry import trace
        except ImportError:
            # `prism serve` checks this before it starts (prism.cli.preflight.check_tracing).
            raise PrismError("PRISM_TRACING=otel needs the OpenTelemetry extra: pip install 'prism[otel]'",
                             code="tracing_not_installed", status=500) from None
        self.active = trace.get_tracer("prism")

    def disable(self) -> None:
        self.active = None


TRACER = _Tracer()


def request_span(method: str, path: str, headers: Mapping[str, str]) -> AbstractContextManager[Any]:
    """The span of one HTTP request, continuing the caller's trace when it sent a `traceparent`."""
    tracer = TRACER.active
    if tracer is None:
        return NO_SPAN
    return _request_span(tracer, method, path, headers)


@contextlib.contextmanager
def _request_span(tracer: Any, method: str, path: str, headers: Mapping[str, str]) -> Iterator[Any]:
    from opentelemetry import propagate, trace

    caller = propagate.extract({"traceparent": headers.get("traceparent", ""),
                                "tracestate": headers.get("tracestate", "")})
    with tracer.start_as_current_span(f"{method} {path}", context=caller, kind=trace.SpanKind.SERVER,
                                      attributes={"http.request.method": method, "url.path": path}) as span:
        yield span


def stage(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """A span around one stage of a dispatch (`prism.dispatch`, `prism.checks`, `prism.ledger`, …)."""
    tracer = TRACER.active
    if tracer is None:
        return NO_SPAN
    return tracer.start_as_current_span(name, attributes=attributes)  # type: ignore[no-any-return]


def current_trace_id() -> str | None:
    """The trace id (32 hex digits) of the span being recorded, or None when nothing is traced."""
    if TRACER.active is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None
