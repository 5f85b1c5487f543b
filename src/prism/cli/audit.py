"""`prism audit …`: verify an organization's log, export its signed checkpoint and proofs, show the signing key,
seal, archive and prune.

Verification and proofs read only; `seal` and `prism migrate` write (positions and signed heads of waiting
entries); `archive --prune` and `retain` delete archived entries.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson
import typer
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.cli.output import JSON_OPT, USAGE_EXIT, emit, fail
from prism.cli.preflight import load_settings
from prism.cli.transaction import in_transaction, on_database
from prism.config import Settings
from prism.errors import InvalidArguments, NotFound, PrismError
from prism.kit.numbers import whole_number
from prism.kit.secret import check_master_secret
from prism.ledger.archive import archive, archive_name, retention_cut
from prism.ledger.checkpoints import Checkpoint, MalformedCheckpoint, parse_checkpoint
from prism.ledger.entries import audit_heads
from prism.ledger.keys import LedgerKeys
from prism.ledger.proofs import checkpoint_argument, prove_consistency, prove_inclusion
from prism.ledger.sealer import SEAL_LIMIT, BrokenLog, logs_to_seal, seal, seal_all
from prism.ledger.upgrade import attest_logs_as_found
from prism.ledger.verify import (
    CheckpointBeforeArchive,
    LogReport,
    StartingPoint,
    UnusableStart,
    latest_kept,
    starting_frontier,
    verify_log,
)
from prism.models import Organization
from prism.storage import Database
from prism.tenancy.service import find_organization, list_organizations, require_tenant

MAX_RETENTION_DAYS = 36_500
audit_cli = typer.Typer(help="The audit ledger: signed Merkle trees, one per organization.", no_args_is_help=True)


def _run(as_json: bool, work: Any, *, read_only: bool = True,
         usage_errors: tuple[type[PrismError], ...] = ()) -> Any:
    return in_transaction(as_json, work, read_only=read_only, usage_errors=usage_errors)


async def _organizations(session: AsyncSession, tenant: str, org: str | None) -> list[Organization]:
    t = await require_tenant(session, tenant)
    return [await find_organization(session, t, org)] if org else await list_organizations(session, t)


async def _one_organization(session: AsyncSession, tenant: str, org: str | None) -> Organization:
    orgs = await _organizations(session, tenant, org)
    if len(orgs) != 1:
        raise PrismError(f"tenant {tenant} has {len(orgs)} organizations; name one with --org",
                         code="organization_required", status=400)
    return orgs[0]


def _read_checkpoint_file(path: Path) -> dict[str, Any]:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InvalidArguments(f"{path}: not a readable JSON checkpoint ({exc})") from exc
    if not isinstance(data, dict):
        raise InvalidArguments(f"{path}: a checkpoint is a JSON object")
    return data


class CheckpointFileRefused(PrismError):
    """A checkpoint file `prism audit verify` cannot use (--since FILE, --checkpoint FILE): a bad argument, exit 2
    as for any usage error, never a broken log (exit 1), so that a script never takes a wrong file for a tampered
    log. Not readable JSON, not a checkpoint, without a frontier that makes its root (--since), not signed by this
    deployment's key, or of no log the command verifies."""

    code, status = "invalid_arguments", 400


def _verify_arguments(keys: LedgerKeys, since: str | None,
                      checkpoint: Path | None) -> tuple[StartingPoint | None, Checkpoint | None]:
    """The --since FILE starting point and the --checkpoint, each checked as far as it can be without the log."""
    start = _starting_point(Path(since), keys) if since not in (None, "latest") else None
    trusted = _trusted_checkpoint(checkpoint, keys) if checkpoint is not None else None
    if start is not None and trusted is not None and start.checkpoint.origin != trusted.origin:
        raise CheckpointFileRefused(f"--since {since} is a checkpoint of {start.checkpoint.origin} and --checkpoint "
                                    f"{checkpoint} one of {trusted.origin}: give two checkpoints of one log")
    return start, trusted


def _starting_point(path: Path, keys: LedgerKeys) -> StartingPoint:
    source = f"--since {path}"
    try:
        data = _read_checkpoint_file(path)
    except InvalidArguments as exc:
        raise CheckpointFileRefused(f"--since {exc.message}") from exc
    frontier = data.get("frontier")
    if not isinstance(frontier, list) or not all(isinstance(h, str) for h in frontier):
        raise CheckpointFileRefused(f"{source}: no frontier; export one with `prism audit checkpoint`")
    try:
        start = StartingPoint(parse_checkpoint(data), frontier)
        starting_frontier(start, keys, source)
    except MalformedCheckpoint as exc:
        raise CheckpointFileRefused(f"{source}: not a checkpoint: {exc}") from exc
    except UnusableStart as exc:
        raise CheckpointFileRefused(str(exc)) from exc
    return start


def _trusted_checkpoint(path: Path, keys: LedgerKeys) -> Checkpoint:
    try:
        trusted = checkpoint_argument(_read_checkpoint_file(path), str(path))
    except InvalidArguments as exc:
        raise CheckpointFileRefused(f"--checkpoint {exc.message}") from exc
    if not trusted.verifies(keys.public_key):
        raise CheckpointFileRefused(f"--checkpoint {path} ({trusted.tree_size} entries of {trusted.origin}) is not "
                                    "signed by this deployment's key")
    return trusted


async def _checked_against(session: AsyncSession, orgs: list[Organization], start: StartingPoint | None,
                           trusted: Checkpoint | None, scope: str) -> tuple[list[Organization], list[dict[str, Any]]]:
    """The organizations to verify: the one a checkpoint file names, which must be one of `orgs` (a checkpoint of
    another organization or tenant proves nothing about these logs), else all of them; and the report of a log
    that is gone. A checkpoint this deployment signed (the file's signature was checked) of an organization that
    no longer exists names a log that existed: Prism has no command that deletes an organization, and deleting
    its row deletes its log with it, so that log is reported BROKEN, not the file refused."""
    named = start.checkpoint if start is not None else trusted
    if named is None:
        return orgs, []
    chosen = [o for o in orgs if o.id == named.organization_id]
    if not chosen:
        if (await session.execute(select(Organization.__table__.c.id).where(
                Organization.__table__.c.id == named.organization_id))).first() is None:
            return ([] if start is not None else orgs), [_gone(named)]
        option = "--since" if start is not None else "--checkpoint"
        raise CheckpointFileRefused(f"the {option} file is a checkpoint of {named.origin}, {scope}",
                                    code="organization_not_found")
    return (chosen if start is not None else orgs), []


def _gone(named: Checkpoint) -> dict[str, Any]:
    report = LogReport(named.organization_id, False, reason=(
        f"this deployment signed a checkpoint of {named.tree_size} entries of this log, and neither the organization "
        "nor its log exists any more: they were deleted"))
    return {"organization": named.organization_id, **report.as_dict()}


@audit_cli.command("verify")
def audit_verify(tenant: str = typer.Option(..., "--tenant"),
                 org: str | None = typer.Option(None, "--org", help="Default: every organization of the tenant."),
                 since: str | None = typer.Option(
                     None, "--since", help="Start from a signed checkpoint: `latest` (the newest kept one) or "
                                           "a file written by `prism audit checkpoint`."),
                 checkpoint: Path | None = typer.Option(
                     None, "--checkpoint", help="A checkpoint kept outside the database (a file written by "
                                                "`prism audit checkpoint`, or an audit.checkpoint event's data): "
                                                "the log must contain it."),
                 as_json: bool = JSON_OPT) -> None:
    """Check every entry and each log's signed head; exit 1 and name the first bad entry if any (exit 2: a
    checkpoint file that cannot be used)."""
    keys = _ledger_keys(as_json)
    try:
        since_file, trusted = _verify_arguments(keys, since, checkpoint)
    except CheckpointFileRefused as exc:
        fail(as_json, exc, exit_code=USAGE_EXIT)

    def progress(done: int) -> None:
        if not as_json:
            typer.echo(f"  … {done:,} entries checked", err=True)

    async def work(session: AsyncSession) -> dict[str, Any]:
        scope = (f"not the log of --org {org} (tenant {tenant})" if org
                 else f"the log of no organization of tenant {tenant}")
        chosen, reports = await _checked_against(session, await _organizations(session, tenant, org), since_file,
                                                 trusted, scope)
        for o in chosen:
            start = await latest_kept(session, o.id) if since == "latest" else since_file
            given = trusted if trusted is not None and trusted.organization_id == o.id else None
            try:
                report = await verify_log(session, o.id, keys, since=start, trusted=given, progress=progress)
            except CheckpointBeforeArchive as exc:  # neither valid nor broken: the archive is checked against it
                raise CheckpointFileRefused(f"--checkpoint {checkpoint}: {exc}") from exc
            reports.append({"organization": o.slug, **report.as_dict()})
        return {"tenant": tenant, "valid": all(r["valid"] for r in reports), "logs": reports}

    out = _run(as_json, work, usage_errors=(CheckpointFileRefused,))
    lines = [f"{r['organization']}: {r['tree_size']} entries ({r['checked']} checked"
             + (f" after checkpoint {r['since']}" if r["since"] else "")
             + (f", {r['waiting']} waiting to be sealed" if r["waiting"] else "") + "), valid"
             if r["valid"] else f"{r['organization']}: BROKEN{_where_broken(r)}: {r['reason']}"
             for r in out["logs"]]
    emit(as_json, out, "\n".join(lines))
    if not out["valid"]:
        raise typer.Exit(1)


def _where_broken(report: dict[str, Any]) -> str:
    """The entry a broken log's report names: by position, or by id for one still waiting to be sealed (it has no
    position yet); nothing for a problem of the head or of a checkpoint, which no single entry carries."""
    seq, entry_id = report["first_broken_seq"], report["first_broken_id"]
    if seq is not None:
        return f" at entry {seq}" + (f" (id {entry_id})" if entry_id is not None else "")
    return f" at waiting entry id {entry_id}" if entry_id is not None else ""


@audit_cli.command("checkpoint")
def audit_checkpoint(tenant: str = typer.Option(..., "--tenant"),
                     org: str | None = typer.Option(None, "--org", help="Needed when the tenant has several."),
                     as_json: bool = JSON_OPT) -> None:
    """Print the log's current signed checkpoint with its frontier (JSON), to keep outside Prism."""

    async def work(session: AsyncSession) -> dict[str, Any]:
        organization = await _one_organization(session, tenant, org)
        head = (await session.execute(select(audit_heads.c.checkpoint, audit_heads.c.frontier).where(
            audit_heads.c.organization_id == organization.id))).first()
        if head is None or head.checkpoint is None:
            raise NotFound("this organization's log has no signed head yet; run `prism migrate`",
                           code="checkpoint_not_found")
        return {**parse_checkpoint(head.checkpoint).as_dict(), "frontier": list(head.frontier or [])}

    _print_document(_run(as_json, work))


@audit_cli.command("prove")
def audit_prove(tenant: str = typer.Option(..., "--tenant"),
                org: str | None = typer.Option(None, "--org", help="Needed when the tenant has several."),
                seq: int = typer.Option(..., "--seq", help="The entry's position in the log."),
                checkpoint: Path | None = typer.Option(
                    None, "--checkpoint", help="Prove against this checkpoint (a file written by `prism audit "
                                               "checkpoint`) instead of the current signed head."),
                as_json: bool = JSON_OPT) -> None:
    """Print the entry with its inclusion proof and the signed checkpoint it is proved against (JSON)."""
    keys = _ledger_keys(as_json)
    against = _checkpoint_file(as_json, checkpoint) if checkpoint is not None else None

    async def work(session: AsyncSession) -> dict[str, Any]:
        organization = await _one_organization(session, tenant, org)
        return await prove_inclusion(session, organization.id, keys, seq, against)

    _print_document(_run(as_json, work))


@audit_cli.command("consistency")
def audit_consistency(tenant: str = typer.Option(..., "--tenant"),
                      org: str | None = typer.Option(None, "--org", help="Needed when the tenant has several."),
                      old: Path = typer.Option(..., "--from", help="An older checkpoint (a file written by "
                                                                   "`prism audit checkpoint`)."),
                      as_json: bool = JSON_OPT) -> None:
    """Print a proof that the current signed head extends an older checkpoint, with both checkpoints (JSON)."""
    keys = _ledger_keys(as_json)
    older = _checkpoint_file(as_json, old)

    async def work(session: AsyncSession) -> dict[str, Any]:
        organization = await _one_organization(session, tenant, org)
        return await prove_consistency(session, organization.id, keys, older)

    _print_document(_run(as_json, work))


def _checkpoint_file(as_json: bool, path: Path) -> Checkpoint:
    try:
        return checkpoint_argument(_read_checkpoint_file(path), str(path))
    except PrismError as exc:
        fail(as_json, exc)


def _ledger_keys(as_json: bool) -> LedgerKeys:
    """The deployment's ledger keys; settings that do not load exit with one clear line."""
    try:
        settings = load_settings()
        check_master_secret(settings, may_create=False)  # a new secret here would sign what nobody can verify
        return LedgerKeys(settings)
    except PrismError as exc:
        fail(as_json, exc)


def _print_document(document: dict[str, Any]) -> None:
    sys.stdout.write(orjson.dumps(document).decode() + "\n")


@audit_cli.command("archive")
def audit_archive(tenant: str = typer.Option(..., "--tenant"),
                  org: str = typer.Option(..., "--org"),
                  through: int = typer.Option(..., "--through", help="The last entry to archive (its seq)."),
                  out: Path = typer.Option(..., "--out", help="The JSON Lines file to write (never overwritten)."),
                  prune: bool = typer.Option(False, "--prune", help="Delete the archived entries from the database."),
                  as_json: bool = JSON_OPT) -> None:
    """Write the log's entries through --through, with the signed checkpoint of exactly them, to a file."""
    keys = _ledger_keys(as_json)

    async def work(db: Database, _: Settings) -> dict[str, Any]:
        async with db.read() as session:
            organization = await _one_organization(session, tenant, org)
        result = await archive(db, organization.id, keys, through=through, out=out, prune=prune)
        return {"organization": organization.slug, **result.as_dict()}

    out_ = on_database(as_json, work)  # read, then written only to prune
    emit(as_json, out_, _archived_line(out_))


@audit_cli.command("retention")
def audit_retention(tenant: str = typer.Option(..., "--tenant"),
                    org: str = typer.Option(..., "--org"),
                    days: str = typer.Option(..., "--days", help="Days entries stay in the database, or `none`."),
                    as_json: bool = JSON_OPT) -> None:
    """Set how long the organization's entries stay in the database before `prism audit retain` archives them."""
    keep = _retention_days(as_json, days)

    async def work(session: AsyncSession) -> dict[str, Any]:
        organization = await _one_organization(session, tenant, org)
        organization.audit_retention_days = keep
        return {"organization": organization.slug, "organization_id": organization.id, "audit_retention_days": keep}

    out = _run(as_json, work, read_only=False)
    emit(as_json, out, f"{out['organization']}: entries kept " + (f"{keep} days" if keep else "for ever"))


@audit_cli.command("retain")
def audit_retain(tenant: str = typer.Option(..., "--tenant"),
                 archive_dir: Path = typer.Option(..., "--archive-dir", help="Where the archive files go."),
                 as_json: bool = JSON_OPT) -> None:
    """Archive and prune, for each organization of the tenant with a retention, the entries older than it."""
    keys = _ledger_keys(as_json)
    try:
        is_directory = archive_dir.is_dir()
    except OSError:  # a name the file system refuses (too long) names no directory either
        is_directory = False
    if not is_directory:
        fail(as_json, InvalidArguments(f"{archive_dir} is not a directory", code="archive_dir_not_found"))

    async def work(db: Database, settings: Settings) -> dict[str, Any]:
        async with db.read() as session:
            organizations = [(o.id, o.slug, o.audit_retention_days)
                             for o in await list_organizations(session, await require_tenant(session, tenant))]
        results = []
        # One organization at a time, each in transactions of its own: an organization's refusal leaves the others'
        # archives in place, and no transaction holds the others' writers while a log is verified.
        for organization_id, slug, days in organizations:
            if days is None:
                continue
            try:
                result = await _retain_one(db, organization_id, days, keys, archive_dir,
                                           settings.audit_checkpoint_interval_seconds)
            except PrismError as exc:
                result = {"error": exc.code, "message": exc.message}
            except (BrokenLog, MalformedCheckpoint) as exc:  # a log this process cannot seal or read: the others go on
                result = {"error": "log_broken", "message": str(exc)}
            results.append({"organization": slug, "organization_id": organization_id, **result})
        return {"tenant": tenant, "logs": results}

    out = on_database(as_json, work)
    emit(as_json, out, "\n".join(
        f"{r['organization']}: error: {r['message']} ({r['error']})" if "error" in r
        else _archived_line(r) if r["file"] else f"{r['organization']}: nothing older than its retention"
        for r in out["logs"]) or "no organization of this tenant has a retention")
    if any("error" in r for r in out["logs"]):
        raise typer.Exit(1)


async def _retain_one(db: Database, organization_id: str, days: int, keys: LedgerKeys, archive_dir: Path,
                      checkpoint_every: float) -> dict[str, Any]:
    while True:  # entries still waiting are sealed first: old ones must not be left behind the archive
        async with db.write() as session:
            if await seal(session, organization_id, keys, checkpoint_every=checkpoint_every) < SEAL_LIMIT:
                break
    async with db.read() as session:
        through = await retention_cut(session, organization_id, days)
        pruned = (await session.execute(select(audit_heads.c.pruned_through).where(
            audit_heads.c.organization_id == organization_id))).scalar()
    if pruned is None or through <= pruned:
        return {"file": None}
    out = archive_dir / archive_name(organization_id, pruned + 1, through)
    result = await archive(db, organization_id, keys, through=through, out=out, prune=True)
    return result.as_dict()


def _archived_line(result: dict[str, Any]) -> str:
    return (f"{result['organization']}: entries {result['first_seq']}..{result['last_seq']} archived to "
            f"{result['file']}" + (" and pruned" if result["pruned"] else ""))


def _retention_days(as_json: bool, days: str) -> int | None:
    if days.strip().lower() == "none":
        return None
    number = whole_number(days.strip())
    if number is None or not 1 <= number <= MAX_RETENTION_DAYS:
        fail(as_json, InvalidArguments(f"--days is a number of days from 1 to {MAX_RETENTION_DAYS}, or `none`"))
    return number


@audit_cli.command("public-key")
def audit_public_key(as_json: bool = JSON_OPT) -> None:
    """The Ed25519 public key every checkpoint of this deployment is signed with (base64, raw 32 bytes)."""
    keys = _ledger_keys(as_json)
    emit(as_json, {"key_id": keys.key_id, "algorithm": "Ed25519", "public_key": keys.public_key_b64},
         f"{keys.key_id} Ed25519 {keys.public_key_b64}")


def seal_waiting_logs(*, sign_unsigned_heads: bool = False, attest_as_found: bool = False) -> int:
    """Seal every log with entries waiting or a head not yet signed; how many entries (`seal_waiting`), on the
    database of the settings: after a migration, which checked them."""
    settings = load_settings()

    async def run() -> int:
        db = Database(settings.database_url)
        try:
            return await seal_waiting(db, settings, sign_unsigned_heads=sign_unsigned_heads,
                                      attest_as_found=attest_as_found)
        finally:
            await db.dispose()

    return asyncio.run(run())


async def seal_waiting(db: Database, settings: Settings, *, sign_unsigned_heads: bool = False,
                       attest_as_found: bool = False) -> int:
    """Seal every log with entries waiting or a head not yet signed; how many entries. An unsigned head is signed
    only with `sign_unsigned_heads`: by the upgrade from the hash chain (docs/audit.md). `attest_as_found`: the
    upgrade across attested prunes first attests the prunes and waiting entries written before it
    (prism.ledger.upgrade)."""
    keys = LedgerKeys(settings)
    if attest_as_found:
        async with db.write() as session:
            await attest_logs_as_found(session, keys)
    organizations = await logs_to_seal(db, with_heads=True)
    return await seal_all(db, organizations, keys, checkpoint_every=settings.audit_checkpoint_interval_seconds,
                          sign_unsigned_heads=sign_unsigned_heads)


@audit_cli.command("seal")
def audit_seal(as_json: bool = JSON_OPT,
               sign_unsigned_heads: bool = typer.Option(
                   False, "--sign-unsigned-heads",
                   help="Also sign heads that have no signature yet. Only after an upgrade from the hash chain "
                        "that stopped before its logs were sealed: at any other time an unsigned head is a "
                        "rewritten one, and signing it would make the rewrite verify."),
               attest_upgraded_logs: bool = typer.Option(
                   False, "--attest-upgraded-logs",
                   help="Also attest prunes made, and MAC entries left waiting, by a Prism before attested prunes. "
                        "Only after an upgrade across them that stopped before it did so: at any other time such a "
                        "prune or entry is a forged one, and attesting it would make it verify.")) -> None:
    """Seal entries that are waiting (normally a running server does this within a second)."""
    async def work(db: Database, settings: Settings) -> int:
        return await seal_waiting(db, settings, sign_unsigned_heads=sign_unsigned_heads,
                                  attest_as_found=attest_upgraded_logs)

    sealed = on_database(as_json, work)  # the settings and the database checked first, as for every command
    emit(as_json, {"sealed": sealed}, f"{sealed} entries sealed")
