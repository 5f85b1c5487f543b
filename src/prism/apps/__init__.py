"""Built-in handler apps. Each app is a package whose `handlers` module declares its handlers."""

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
