"""Prism's reference topology on loopback: nginx terminating TLS in front of two `prism serve` nodes, one
`prism worker`, all on one PostgreSQL database and one Redis.

    python deploy/topology.py --postgres postgresql://postgres@127.0.0.1:5432/postgres \\
        --redis redis://127.0.0.1:6379/0

creates a fresh database on that server, brings everything up, prints where to reach it and the demo key, and
tears it all down (the database too, unless --keep-database) on Ctrl-C. tests/test_deploy_topology.py drives
the same `Topology` class. Every process shares one master secret (PRISM_SECRET_KEY): sessions, OAuth signing
keys and webhook secrets sealed by one process must open in every other.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
TEMPLATE = Path(__file__).with_name("nginx.conf.template")


def find_nginx() -> str | None:
    """nginx on PATH, else Debian's /usr/sbin/nginx (not on an unprivileged user's PATH)."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def prism_command() -> list[str]:
    script = Path(sys.executable).with_name("prism")
    return [str(script)] if script.exists() else [sys.executable, "-m", "prism.cli.main"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A local CA and a server certificate it signs for localhost, *.localhost tenants used here and 127.0.0.1.
    Returns (ca, certificate, key)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = directory / "ca.pem", directory / "ca.key"
    cert, key, csr, ext = (directory / name for name in ("server.pem", "server.key", "server.csr", "server.ext"))
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = [["openssl", "req", "-x509", *curve, "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
            "-subj", "/CN=Prism local CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
           ["openssl", "req", *curve, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost"]]
    ext.write_text("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                   "extendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid,issuer\n"
                   "subjectAltName=DNS:localhost,DNS:demo.localhost,IP:127.0.0.1\n")
    run.append(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
                "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext)])
    for args in run:
        subprocess.run(args, check=True, capture_output=True)  # noqa: S603 -- fixed arguments, our paths
    return ca, cert, key


@dataclass
class Process:
    """One process of the topology in a process group of its own, so that a node's supervisor and all its
    worker processes stop (or die) together."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_dir: Path
    proc: subprocess.Popen[bytes] = field(init=False)

    def __post_init__(self) -> None:
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=err, stdin=subprocess.DEVNULL,  # noqa: S603
                                         env=self.env, cwd=self.log_dir, start_new_session=True)

    @property
    def out(self) -> Path:
        return self.log_dir / f"{self.name}.out"

    @property
    def err(self) -> Path:
        return self.log_dir / f"{self.name}.err"

    def describe(self) -> str:
        return (f"{self.name} (exit {self.proc.poll()})\n--- stdout\n{self.out.read_text(errors='replace')}\n"
                f"--- stderr\n{self.err.read_text(errors='replace')}")

    def first_json(self, timeout: float) -> dict[str, Any]:
        """The first JSON document the process prints on stdout (the banner of `--json`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value, _ = json.JSONDecoder().raw_decode(self.out.read_text().lstrip())
                return dict(value)
            except ValueError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"exited before printing its banner:\n{self.describe()}")
            time.sleep(0.1)
        raise RuntimeError(f"no banner within {timeout} s:\n{self.describe()}")

    def signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.proc.pid, signum)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL to the whole group: the supervisor and every worker process, with no chance to clean up."""
        self.signal_group(signal.SIGKILL)
        self.proc.wait(timeout=15)

    def stop(self) -> None:
        self.signal_group(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()
        self.signal_group(signal.SIGKILL)  # any worker process its supervisor left behind


@dataclass
class Node:
    process: Process
    port: int
    banner: dict[str, Any]

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"


class Topology:
    """nginx (TLS, round robin) → two `prism serve --workers 2` nodes; one `prism worker`; PostgreSQL, Redis."""

    def __init__(self, directory: Path, *, database_url: str, redis_url: str, settings: dict[str, str] | None = None,
                 workers: int = 2, nginx_worker_processes: int = 1, show_upstream: bool = False) -> None:
        self.directory = directory
        self.database_url = database_url
        self.workers = workers
        self.nginx_worker_processes = nginx_worker_processes
        # X-Prism-Upstream names the node that answered: for tests and trials, not for a public deployment.
        self.show_upstream = show_upstream
        self.port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PRISM_")}
        self.env.update({"PRISM_DATABASE_URL": database_url, "PRISM_REDIS_URL": redis_url,
                         "PRISM_SECRET_KEY": secrets.token_urlsafe(48), "PRISM_TRUSTED_PROXIES": HOST,
                         "PRISM_PUBLIC_SCHEME": "https", "PRISM_WEBHOOK_WORKER_IN_PROCESS": "false",
                         **(settings or {})})
        self.nodes: list[Node] = []
        self.processes: list[Process] = []
        self.ca = self.directory / "tls" / "ca.pem"

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}"

    def host(self, subdomain: str | None = None) -> str:
        """The Host header of the platform host, or of a tenant's host, as clients address nginx."""
        return f"{subdomain}.localhost:{self.port}" if subdomain else f"localhost:{self.port}"

    def start(self) -> None:
        nginx = find_nginx()
        if nginx is None:
            raise RuntimeError("nginx is not installed (Debian: apt-get install nginx-light)")
        try:
            self._write_env_file()
            self.nodes.append(self._node("node-a", "--seed-demo"))
            self.nodes.append(self._node("node-b", "--no-seed-demo"))
            worker = self._spawn("worker", [*prism_command(), "worker", "--json"])
            if worker.first_json(timeout=60).get("event") != "started":
                raise RuntimeError(worker.describe())
            self._nginx(nginx)
        except BaseException:
            self.stop()
            raise

    def _write_env_file(self) -> None:
        """The deployment's settings, secret included, for the operator's `prism` commands (`set -a; . FILE`):
        the CLI must share the master secret too (the ledger's signing key derives from it)."""
        self.env_file.touch(mode=0o600)
        self.env_file.write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in sorted(self.env.items())
                                         if k.startswith("PRISM_")))

    @property
    def env_file(self) -> Path:
        return self.directory / "prism.env"

    def _spawn(self, name: str, args: list[str]) -> Process:
        process = Process(name, args, self.env, self.directory)
        self.processes.append(process)
        return process

    def _node(self, name: str, seed: str) -> Node:
        port = free_port()
        process = self._spawn(name, [*prism_command(), "serve", "--host", HOST, "--port", str(port),
                                     "--workers", str(self.workers), seed, "--json"])
        # The banner comes once every worker process serves; on a busy machine that takes a while.
        return Node(process, port, process.first_json(timeout=180))

    def _nginx(self, nginx: str) -> None:
        ca, cert, key = make_certificates(self.directory / "tls")
        prefix = self.directory / "nginx"
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (prefix / "tmp" / sub).mkdir(parents=True, exist_ok=True)
        servers = "\n".join(f"        server {n.address} max_fails=1 fail_timeout=10s;" for n in self.nodes)
        extra = "        add_header X-Prism-Upstream $upstream_addr always;" if self.show_upstream else ""
        config = TEMPLATE.read_text()
        for name, value in {"@WORKER_PROCESSES@": str(self.nginx_worker_processes), "@PREFIX@": str(prefix),
                            "@SERVERS@": servers, "@LISTEN@": f"{HOST}:{self.port}", "@CERTIFICATE@": str(cert),
                            "@CERTIFICATE_KEY@": str(key), "@EXTRA@": extra}.items():
            config = config.replace(name, value)
        conf = prefix / "nginx.conf"
        conf.write_text(config)
        # -e: the error log of start-up, before the configuration is read, is ours too (not /var/log/nginx).
        base = [nginx, "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf)]
        checked = subprocess.run([*base, "-t"], capture_output=True, text=True, check=False)  # noqa: S603
        if checked.returncode:
            raise RuntimeError(f"nginx refused its configuration:\n{checked.stderr}")
        process = self._spawn("nginx", [*base, "-g", "daemon off;"])
        context = ssl.create_default_context(cafile=str(ca))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", context=context, timeout=2) as answer:  # noqa: S310
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
            if process.proc.poll() is not None:
                break
        raise RuntimeError(f"nginx did not answer /readyz over TLS:\n{process.describe()}")

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()


def _admin(url: str, statement: str) -> None:
    import asyncio

    import asyncpg  # type: ignore[import-untyped]

    async def run() -> None:
        conn = await asyncpg.connect(url, timeout=10)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", required=True, help="a PostgreSQL server (URL of any database on it)")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--directory", type=Path, help="logs, certificates, nginx prefix (default: a new tmp dir)")
    parser.add_argument("--keep-database", action="store_true")
    options = parser.parse_args()
    import tempfile

    from sqlalchemy.engine import make_url

    server = make_url(options.postgres).set(drivername="postgresql")
    name = f"prism_topology_{uuid.uuid4().hex[:8]}"
    admin = server.set(database="postgres").render_as_string(hide_password=False)
    _admin(admin, f'CREATE DATABASE "{name}"')
    directory = options.directory or Path(tempfile.mkdtemp(prefix="prism-topology-"))
    topology = Topology(directory, database_url=server.set(database=name).render_as_string(hide_password=False),
                        redis_url=options.redis, nginx_worker_processes=2, show_upstream=True)
    try:
        topology.start()
        demo = topology.nodes[0].banner
        print(json.dumps({"url": topology.url, "ca": str(topology.ca), "database": name, "logs": str(directory),
                          "nodes": {n.address: n.process.proc.pid for n in topology.nodes},
                          "nginx": str(directory / "nginx"), "env_file": str(topology.env_file),
                          "tenant_host": topology.host("demo"),
                          "api_key": demo.get("api_key")}, indent=2), flush=True)
        waited = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, waited)
        signal.sigwait(waited)
    finally:
        topology.stop()
        if not options.keep_database:
            _admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
