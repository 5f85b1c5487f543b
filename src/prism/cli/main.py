"""The `prism` command line. Every command takes --json for machine-readable output."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import typer
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession
from typer.exceptions import TyperException

from prism.cli.api_keys import key_cli
from prism.cli.audit import audit_cli, seal_waiting_logs
from prism.cli.governance import governance_cli, persona_cli
from prism.cli.output import JSON_OPT, USAGE_EXIT, emit, fail, report_error
from prism.cli.preflight import (
    check_apps,
    check_database_reachable,
    database_error,
    database_settings,
    load_settings,
)
from prism.cli.serve import check_ledger_key
from prism.cli.transaction import in_transaction
from prism.cli.users import AS_ARGUMENT_HELP, FROM_STDIN_HELP, new_password_hash, user_cli
from prism.errors import PrismError
from prism.identity.service import (
    add_to_organization,
    create_user,
    require_user,
)
from prism.integrations.cli import integration_cli
from prism.kit.ids import public_organization_id
from prism.kit.timeutil import iso
from prism.ledger.keys import LedgerKeys
from prism.oauth.cli import keys_cli
from prism.storage import backend_of
from prism.tenancy.service import (
    create_organization,
    create_tenant,
    list_organizations,
    list_tenants,
    require_tenant,
)
from prism.webhooks.cli import worker as webhook_worker

cli = typer.Typer(help="Prism: governed tool dispatch for AI agents.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
tenant_cli = typer.Typer(help="Tenants (one subdomain each).", no_args_is_help=True)
org_cli = typer.Typer(help="Organizations within a tenant.", no_args_is_help=True)
for sub, name in ((tenant_cli, "tenant"), (org_cli, "org"), (user_cli, "user"), (key_cli, "key"),
                  (audit_cli, "audit")):
    cli.add_typer(sub, name=name)
cli.command("worker")(webhook_worker)
cli.add_typer(keys_cli, name="keys")
cli.add_typer(persona_cli, name="persona"); cli.add_typer(governance_cli, name="governance")  # noqa: E702
cli.add_typer(integration_cli, name="integration")


@cli.command("serve")
def serve_command(host: str = typer.Option("127.0.0.1", "--host"),
                  port: int = typer.Option(8000, "--port", min=0, max=65535),
                  workers: int = typer.Option(1, "--workers", min=1),
                  seed_demo: bool | None = typer.Option(
                      None, "--seed-demo/--no-seed-demo",
                      help="Seed the demo tenant on an empty database. Default: PRISM_SEED_DEMO, else only when "
                           "PRISM_DATABASE_URL is not set (the SQLite file in the working directory)."),
                  as_json: bool = typer.Option(False, "--json", help="Print the start-up banner as JSON.")) -> None:
    """Run Prism (applies migrations first; once listening, seeds a demo tenant on an empty embedded database)."""
    from prism.kit.collector import pause_until_serving

    if workers == 1:
        # This process becomes the server: no garbage collection until its app is built (prism.cli.serve.
        # serving_app). With more workers, each is a fresh process and this one supervises them.
        pause_until_serving()
    from prism.cli.serve import serve  # the server stack loads only for this command

    serve(host=host, port=port, workers=workers, as_json=as_json, seed=seed_demo)


@cli.command()
def migrate(as_json: bool = JSON_OPT) -> None:
    """Apply database migrations (an empty database is created at the newest revision)."""
    from prism.migrate import upgrade

    try:
        settings = database_settings(may_create=True)
        check_apps(settings)  # a migration may load the apps (0031 does): a typo is named, as `prism serve` does
        url = settings.database_url
        if backend_of(url) != "sqlite":
            check_database_reachable(url)
        try:
            steps = upgrade(url)
        except (SQLAlchemyError, OSError) as exc:
            raise database_error(url, getattr(exc, "orig", None) or exc) from None
        check_ledger_key(settings)  # before sealing anything, as `prism serve` checks before serving
    except PrismError as exc:
        fail(as_json, exc)
    # What only the upgrade that brings the logs across does (signing heads written before the tree, attesting
    # prunes and waiting entries written before they were bound), now, with the database as it found it.
    sealed = seal_waiting_logs(sign_unsigned_heads=steps.sign_unsigned_heads, attest_as_found=steps.attest_as_found)
    emit(as_json, {"migrated": True, "sealed": sealed}, "migrations applied")


@tenant_cli.command("create")
def tenant_create(subdomain: str, name: str = typer.Option(..., "--name"),
                  admin_email: str = typer.Option(..., "--admin-email"),
                  admin_password: str | None = typer.Option(None, "--admin-password", help=AS_ARGUMENT_HELP),
                  admin_password_stdin: bool = typer.Option(False, "--admin-password-stdin", help=FROM_STDIN_HELP),
                  org_name: str | None = typer.Option(None, "--org-name", help="Default: the tenant name."),
                  as_json: bool = JSON_OPT) -> None:
    """Create a tenant with a first organization and its owner (an existing user keeps their password; a new one's
    is asked on the terminal, read from stdin, or given)."""
    password_hash = None  # an existing user keeps their password: none is asked for, read or hashed
    if not in_transaction(as_json, user_exists(admin_email), read_only=True):
        password_hash = new_password_hash(as_json, admin_password, from_stdin=admin_password_stdin)

    async def work(session: AsyncSession) -> dict[str, Any]:
        tenant = await create_tenant(session, subdomain, name=name)
        org = await create_organization(session, tenant, name=org_name or name, keys=LedgerKeys(load_settings()))
        user, created = await require_or_create_user(session, admin_email, password_hash)
        await add_to_organization(session, user, org, role="owner")
        return {"tenant": {"id": tenant.id, "subdomain": tenant.subdomain, "name": tenant.name},
                "organization": {"id": public_organization_id(org.id), "slug": org.slug, "name": org.name},
                "admin": {"id": user.id, "email": user.email, "role": "owner", "existing_user": not created}}

    out = in_transaction(as_json, work)
    note = " (existing user: their password is unchanged)" if out["admin"]["existing_user"] else ""
    emit(as_json, out, f"tenant {out['tenant']['subdomain']} created; organization {out['organization']['slug']}; "
                       f"owner {out['admin']['email']}{note}")


async def require_or_create_user(session: AsyncSession, email: str,
                                 password_hash: str | None) -> tuple[Any, bool]:
    """(user, created). Users are global: an existing user keeps their password."""
    try:
        return await require_user(session, email), False
    except PrismError:
        if password_hash is None:  # created meanwhile, then removed: the password was not asked for
            raise PrismError(f"{email} is not a user yet: give the new owner's password",
                             code="password_required") from None
        return await create_user(session, email, password_hash), True


def user_exists(email: str) -> Callable[[AsyncSession], Awaitable[bool]]:
    async def work(session: AsyncSession) -> bool:
        try:
            await require_user(session, email)
        except PrismError:
            return False
        return True

    return work


@tenant_cli.command("list")
def tenant_list(as_json: bool = JSON_OPT) -> None:
    """List the deployment's tenants."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        return {"tenants": [{"id": t.id, "subdomain": t.subdomain, "name": t.name, "created_at": iso(t.created_at)}
                            for t in await list_tenants(session)]}

    out = in_transaction(as_json, work, read_only=True)
    emit(as_json, out, "\n".join(f"{t['subdomain']}\t{t['name'] or ''}" for t in out["tenants"]) or "no tenants")


@org_cli.command("create")
def org_create(name: str, tenant: str = typer.Option(..., "--tenant"),
               slug: str | None = typer.Option(None, "--slug"), as_json: bool = JSON_OPT) -> None:
    """Create an organization in a tenant."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        org = await create_organization(session, await require_tenant(session, tenant), name=name, slug=slug,
                                        keys=LedgerKeys(load_settings()))
        return {"id": public_organization_id(org.id), "slug": org.slug, "name": org.name, "tenant": tenant}

    out = in_transaction(as_json, work)
    emit(as_json, out, f"organization {out['slug']} ({out['id']}) created in {tenant}")


@org_cli.command("list")
def org_list(tenant: str = typer.Option(..., "--tenant"), as_json: bool = JSON_OPT) -> None:
    """List a tenant's organizations."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        orgs = await list_organizations(session, await require_tenant(session, tenant))
        return {"organizations": [{"id": public_organization_id(o.id), "slug": o.slug, "name": o.name}
                                  for o in orgs]}

    out = in_transaction(as_json, work, read_only=True)
    emit(as_json, out, "\n".join(f"{o['slug']}\t{o['id']}\t{o['name']}" for o in out["organizations"]))


def main() -> None:
    # A command's outcome, refusals included, is what it prints; a record logged on the way (a security event such as
    # an outbound target refused) would otherwise reach stderr through Python's last-resort handler as a bare line,
    # breaking --json's one-JSON-line error. `serve` and `worker` install handlers of their own.
    logging.getLogger("prism").addHandler(logging.NullHandler())
    refuse_undecodable_arguments(sys.argv[1:])
    if "--json" not in sys.argv[1:]:
        cli()
        return
    # With --json every error is one JSON line on stderr; Typer would draw a usage error (an option missing,
    # unknown or malformed) as a text panel, so such errors are let through here and written as the others.
    try:
        outcome = cli(standalone_mode=False)
    except TyperException as exc:  # the base of every usage error Typer raises
        report_error(True, PrismError(exc.format_message(), code="usage_error", status=400))
        sys.exit(exc.exit_code)
    except typer.Abort:
        report_error(True, PrismError("aborted", code="aborted", status=400))
        sys.exit(1)
    sys.exit(outcome if isinstance(outcome, int) else 0)


def refuse_undecodable_arguments(arguments: list[str]) -> None:
    """Exit with a usage error when an argument is not UTF-8 text. Python keeps such bytes as lone surrogates
    (surrogateescape), which no database driver can encode: the command would end in a traceback instead."""
    for argument in arguments:
        try:
            argument.encode()
        except UnicodeEncodeError:
            shown = os.fsencode(argument).decode(errors="backslashreplace")  # the bytes as given: Caf\xe9
            report_error("--json" in arguments, PrismError(
                f"argument '{shown}' is not valid UTF-8 text; give it in UTF-8", code="usage_error", status=400))
            sys.exit(USAGE_EXIT)
