"""Commands that act through the dispatcher, as the API and the console do: RBAC, governance and the ledger entry
(door `cli`, credential `operator`: prism.auth.operator) apply to them the same way."""

from __future__ import annotations

from typing import Any

from prism.auth.context import AuthContext
from prism.auth.operator import DOOR
from prism.config import Settings
from prism.dispatch.dispatcher import Call, Dispatcher
from prism.ledger.sealer import seal_all
from prism.registry import Registry
from prism.registry.mega_tools import tool_name
from prism.registry.registry import load_app
from prism.storage import Database

# The apps whose handlers the command line calls: loading only these keeps a command's start short.
OPERATOR_APPS = ("prism.apps.keys.handlers",)


def operator_registry() -> Registry:
    registry = Registry()
    for spec in OPERATOR_APPS:
        registry.add_app(load_app(spec))
    return registry.freeze()


async def dispatch_as_operator(db: Database, settings: Settings, auth: AuthContext, coordinate: str,
                               arguments: dict[str, Any]) -> Any:
    """One handler (`mega/app/entity/operation`) dispatched as `auth` through door `cli`; a refusal is raised as
    its PrismError after its ledger entry is written. The entry is sealed before the command ends: no server
    need be running to sign the log's new head."""
    mega, app, entity, operation = coordinate.split("/")
    call = Call(tool_name=tool_name(mega), door=DOOR, arguments=arguments, app=app, entity=entity,
                operation=operation)
    dispatcher = Dispatcher(db, operator_registry(), settings)
    try:
        _, result = await dispatcher.dispatch(auth, call)
    finally:
        await dispatcher.close()
        await seal_all(db, [auth.organization_id], dispatcher.ledger.keys,
                       checkpoint_every=settings.audit_checkpoint_interval_seconds)
    return result
