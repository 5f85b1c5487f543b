"""`prism user`: users (global, one email each) and their memberships in organizations."""

from __future__ import annotations

import sys
from typing import Any

import typer
from sqlalchemy.ext.asyncio import AsyncSession

from prism.cli.output import JSON_OPT, emit, fail
from prism.cli.transaction import in_transaction
from prism.errors import PrismError
from prism.identity.service import (
    add_to_organization,
    create_user,
    members_of_tenant,
    memberships_in_tenant,
    password_hash_of,
    remove_from_organization,
    require_user,
    set_active,
    set_password,
)
from prism.kit.ids import public_organization_id
from prism.tenancy.service import find_organization, require_tenant

FROM_STDIN_HELP = "Read the password from the first line of stdin."
# Kept for scripts that already pass it; the prompt and stdin keep the password out of the process list.
AS_ARGUMENT_HELP = ("The password itself: other users of this machine can read it in the process list and it "
                    "stays in the shell's history; prefer the prompt or stdin.")

user_cli = typer.Typer(help="Users and memberships.", no_args_is_help=True)


@user_cli.command("create")
def user_create(email: str, password: str | None = typer.Option(None, "--password", help=AS_ARGUMENT_HELP),
                password_stdin: bool = typer.Option(False, "--password-stdin", help=FROM_STDIN_HELP),
                as_json: bool = JSON_OPT) -> None:
    """Create a user (users are global; add them to organizations with add-to-org). The password is asked on the
    terminal, read from stdin, or given."""
    chosen = new_password_hash(as_json, password, from_stdin=password_stdin)

    async def work(session: AsyncSession) -> dict[str, Any]:
        user = await create_user(session, email, chosen)
        return {"id": user.id, "email": user.email}

    out = in_transaction(as_json, work)
    emit(as_json, out, f"user {out['email']} ({out['id']}) created")


@user_cli.command("list")
def user_list(tenant: str = typer.Option(..., "--tenant"),
              org: str | None = typer.Option(None, "--org", help="Only this organization (id or slug)."),
              as_json: bool = JSON_OPT) -> None:
    """List the members of a tenant's organizations, with their roles."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        t = await require_tenant(session, tenant)
        organization = await find_organization(session, t, org) if org else None
        return {"members": [{"user_id": user.id, "email": user.email, "organization": public_organization_id(o.id),
                             "organization_slug": o.slug, "role": role}
                            for user, o, role in await members_of_tenant(session, t, organization)]}

    out = in_transaction(as_json, work, read_only=True)
    emit(as_json, out, "\n".join(f"{m['email']}\t{m['organization_slug']}\t{m['role']}" for m in out["members"])
         or "no members")


@user_cli.command("add-to-org")
def user_add_to_org(email: str, tenant: str = typer.Option(..., "--tenant"),
                    org: str = typer.Option(..., "--org", help="Organization id or slug."),
                    role: str = typer.Option("member", "--role", help="owner, admin, member or viewer."),
                    as_json: bool = JSON_OPT) -> None:
    """Give a user a role in an organization (changes the role if already a member)."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        t = await require_tenant(session, tenant)
        organization = await find_organization(session, t, org)
        user = await require_user(session, email)
        await add_to_organization(session, user, organization, role=role)
        return {"user": user.email, "organization": organization.slug, "role": role, "tenant": t.subdomain}

    out = in_transaction(as_json, work)
    emit(as_json, out, f"{out['user']} is {out['role']} of {out['organization']}")


@user_cli.command("remove-from-org")
def user_remove_from_org(email: str, tenant: str = typer.Option(..., "--tenant"),
                         org: str = typer.Option(..., "--org", help="Organization id or slug."),
                         as_json: bool = JSON_OPT) -> None:
    """End a user's membership of an organization (never its last owner's): their keys for it stop working on every
    process within PRISM_CREDENTIAL_CACHE_SECONDS, and the console and OAuth no longer let them act in it."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        t = await require_tenant(session, tenant)
        organization = await find_organization(session, t, org)
        user = await require_user(session, email)
        role = await remove_from_organization(session, user, organization)
        return {"user": user.email, "organization": organization.slug, "removed_role": role, "tenant": t.subdomain}

    out = in_transaction(as_json, work)
    emit(as_json, out, f"{out['user']} is no longer a member of {out['organization']}")


@user_cli.command("deactivate")
def user_deactivate(email: str, as_json: bool = JSON_OPT) -> None:
    """Refuse a user everywhere (users are global: every tenant): sign-in, console sessions (ended now), API keys and
    OAuth tokens (on every process within PRISM_CREDENTIAL_CACHE_SECONDS). `activate` undoes it."""
    _set_active(email, False, as_json)


@user_cli.command("activate")
def user_activate(email: str, as_json: bool = JSON_OPT) -> None:
    """Let a deactivated user in again, with the memberships, keys and grants they had."""
    _set_active(email, True, as_json)


def _set_active(email: str, active: bool, as_json: bool) -> None:
    async def work(session: AsyncSession) -> dict[str, Any]:
        user = await require_user(session, email)
        await set_active(session, user, active)
        return {"user": user.email, "active": active}

    out = in_transaction(as_json, work)
    emit(as_json, out, f"{out['user']} {'activated' if active else 'deactivated'}")


@user_cli.command("set-password")
def user_set_password(tenant: str = typer.Option(..., "--tenant"), email: str = typer.Option(..., "--email"),
                      password_stdin: bool = typer.Option(False, "--password-stdin", help=FROM_STDIN_HELP),
                      as_json: bool = JSON_OPT) -> None:
    """Set a user's password (prompted twice, or read from stdin; never taken as an argument)."""
    password_hash = new_password_hash(as_json, None, from_stdin=password_stdin)

    async def work(session: AsyncSession) -> dict[str, Any]:
        t = await require_tenant(session, tenant)
        user = await require_user(session, email)
        if not await memberships_in_tenant(session, user, t.id):  # another tenant's user is not this one's to change
            raise PrismError(f"{email} belongs to no organization of {tenant}", code="not_a_member", status=403)
        await set_password(session, user, password_hash)
        return {"user": user.email, "tenant": t.subdomain, "password_set": True}

    out = in_transaction(as_json, work)
    emit(as_json, out, f"password of {out['user']} set")


def new_password_hash(as_json: bool, given: str | None, *, from_stdin: bool) -> str:
    """The new password, hashed before any transaction (`password_hash_of`); a weak one ends the command."""
    try:
        return password_hash_of(new_password(as_json, given, from_stdin=from_stdin))
    except PrismError as exc:
        fail(as_json, exc)


def new_password(as_json: bool, given: str | None, *, from_stdin: bool) -> str:
    """The password given as an argument, read from stdin's first line, or asked twice on the terminal."""
    if given is not None:
        if from_stdin:
            fail(as_json, PrismError("give the password as an argument or on stdin, not both",
                                     code="invalid_arguments"))
        return given
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if not sys.stdin.isatty():
        fail(as_json, PrismError("no terminal to ask for the password on: pipe it in with --password-stdin",
                                 code="password_required"))
    password: str = typer.prompt("New password", hide_input=True, confirmation_prompt=True)
    return password
