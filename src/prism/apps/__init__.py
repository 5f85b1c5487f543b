"""Built-in handler apps. Each app is a package whose `handlers` module declares its handlers.

`examples.json` holds the example requests of every shipped handler (`HandlerApp.examples`): what people ask of
it in their own words, written from the catalog alone (docs/search.md says how), for capability search.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from types import MappingProxyType

BUILTIN_APP_MODULES = (
    "prism.apps.core.handlers",
    "prism.apps.spare_parts.handlers",
    "prism.apps.finance.handlers",
    # The ledger is Prism's own record of every call: its API ships with the core, not as a pluggable app.
    "prism.apps.ledger.handlers",
    # A person's own API keys: the console mints them through the dispatcher like any other call.
    "prism.apps.keys.handlers",
    "prism.apps.organization.handlers",
)


@cache
def shipped_examples() -> Mapping[str, tuple[str, ...]]:
    """The example requests of the shipped apps' handlers, by handler path; read once per process."""
    text = resources.files(__name__).joinpath("examples.json").read_text(encoding="utf-8")
    return MappingProxyType({path: tuple(requests) for path, requests in json.loads(text).items()})
