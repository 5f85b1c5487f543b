"""Process plumbing shared by the benchmarks: ports, servers in subprocesses, /proc readings."""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from prism.ratelimit.limiter import TIERS

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
LOOPBACK = "127.0.0.1"
PING_PATH = "/api/v1/dev/ping/"
# The `prism` entry point installed beside the interpreter running the benchmark (the repo's venv).
PRISM = str(Path(sys.executable).with_name("prism"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def pinned(command: Sequence[str], cpus: str | None) -> list[str]:
    """Prefix with taskset so the process and every thread it starts stay on `cpus`."""
    return ["taskset", "-c", cpus, *command] if cpus else list(command)


RAISED_CEILINGS = {f"PRISM_RATE_LIMIT_{tier.upper()}": "1000000000" for tier in TIERS}


def bench_env(**overrides: str) -> dict[str, str]:
    """The caller's environment plus the repo on PYTHONPATH (so `bench.*` modules import in servers)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    # The start-up banner is read through a pipe; without this it would sit in the buffer.
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


def proc_memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (resident now) and VmHWM (peak resident) of a live process, in KiB."""
    wanted = {"VmRSS", "VmHWM"}
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in wanted:
            out[name] = int(value.split()[0])
    return out


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all threads included."""
    # The command name (field 2) may contain spaces; the fields after its closing parenthesis do not.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """`proc_cpu_seconds` of a process and its live children (a server's worker processes)."""
    total = proc_cpu_seconds(pid)
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        if int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def postgres_cpu_seconds() -> float:
    """CPU time of the machine's PostgreSQL server: its live processes (backends, WAL writer, checkpointer, ...)
    plus what its postmaster has collected from exited ones, so a backend that exits between two readings keeps
    its time counted instead of taking it away (a reading by live backends alone once went negative)."""
    processes: dict[int, tuple[int, int, int]] = {}  # pid -> (parent, own ticks, reaped children's ticks)
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            head, _, rest = (proc / "stat").read_text().rpartition(")")
        except OSError:  # exited meanwhile
            continue
        if head.split("(", 1)[-1] == "postgres":
            fields = rest.split()
            processes[int(proc.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]),
                                         int(fields[13]) + int(fields[14]))
    # Only the postmaster (the postgres process whose parent is not one) reaps the server's processes.
    ticks = sum(own + (reaped if parent not in processes else 0) for parent, own, reaped in processes.values())
    return ticks / os.sysconf("SC_CLK_TCK")


def named_process_cpu_seconds(name: str) -> float:
    """CPU time of the live processes whose command name is `name` (e.g. the machine's `redis-server`)."""
    total = 0.0
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            head, _, rest = (proc / "stat").read_text().rpartition(")")
        except OSError:  # exited meanwhile
            continue
        if head.split("(", 1)[-1] == name:
            fields = rest.split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def system_busy_seconds() -> float:
    """CPU time spent by every process on the machine (all cores), from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU time of this process's finished children (wrk runs), user + system."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def code_version() -> dict[str, Any]:
    """Which Prism was measured: the commit, and a digest of uncommitted changes under src/ if any."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False).stdout

    commit = git("rev-parse", "--short", "HEAD").strip()
    changes = git("diff", "HEAD", "--", "src") + git("ls-files", "--others", "--exclude-standard", "src")
    for path in git("ls-files", "--others", "--exclude-standard", "src").split():
        changes += (REPO / path).read_text(errors="replace")
    digest = hashlib.sha256(changes.encode()).hexdigest()[:12] if changes else None
    return {"commit": commit, "uncommitted_src_digest": digest}


def machine() -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown")
    mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {"nproc": os.cpu_count(), "cpu_model": model, "memory_gib": round(mem_kib / 1024**2, 1),
            "kernel": platform.release(), "python": platform.python_version(), "prism": code_version()}


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    spawned_at: float  # time.perf_counter() just before the spawn
    log: IO[bytes]

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, path: str = PING_PATH, timeout: float = 120.0) -> float:
        """Poll `path` until it answers 200; the seconds since the spawn."""
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.base_url, timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.log.name}")
                try:
                    if client.get(path).status_code == 200:
                        return time.perf_counter() - self.spawned_at
                except httpx.TransportError:
                    pass
                time.sleep(0.005)
        raise TimeoutError(f"{self.name} did not answer {path} within {timeout} s")

    def stop(self) -> None:
        """Graceful stop (SIGTERM lets Uvicorn run the lifespan shutdown), then a kill if it hangs."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.close()


def spawn(name: str, command: Sequence[str], *, env: Mapping[str, str], cwd: Path, port: int,
          log_path: Path) -> Server:
    log = log_path.open("wb")
    spawned_at = time.perf_counter()
    process = subprocess.Popen(list(command), env=dict(env), cwd=cwd, stdout=subprocess.PIPE, stderr=log)
    return Server(name, process, port, spawned_at, log)


def start_prism(*, database_url: str, cwd: Path, log_path: Path, cpus: str | None = None,
                extra_env: Mapping[str, str] | None = None, workers: int = 1) -> tuple[Server, dict[str, Any]]:
    """`prism serve --json` on a free port: (server, its start-up banner)."""
    port = free_port()
    # The rate limiter keeps running, with ceilings no benchmark reaches (one client, one user, one address).
    # Per-process counters (several workers without Redis) change nothing at those ceilings.
    env = bench_env(**{**RAISED_CEILINGS, "PRISM_RATE_LIMIT_PER_PROCESS": "true", "PRISM_DATABASE_URL": database_url,
                       "PRISM_LOG_LEVEL": "warning", **(extra_env or {})})
    # --seed-demo: the benchmarks read the demo key from the banner, and a database named by URL is not seeded
    # unless asked.
    command = pinned([PRISM, "serve", "--host", LOOPBACK, "--port", str(port), "--workers", str(workers), "--json",
                      "--seed-demo"], cpus)
    server = spawn("prism", command, env=env, cwd=cwd, port=port, log_path=log_path)
    try:
        return server, read_banner(server)
    except BaseException:
        server.stop()
        raise


def read_banner(server: Server) -> dict[str, Any]:
    """The banner is one JSON document (one line; read until it parses all the same)."""
    assert server.process.stdout is not None
    text = ""
    while True:
        line = server.process.stdout.readline()
        if not line:
            raise RuntimeError(f"prism exited before printing its banner; see {server.log.name}")
        text += line.decode()
        try:
            banner: dict[str, Any] = json.loads(text)
        except json.JSONDecodeError:
            continue
        return banner


def prism_cli(args: Sequence[str], *, database_url: str, cwd: Path) -> dict[str, Any]:
    """Run a `prism ... --json` command against the same database; its parsed JSON output."""
    done = subprocess.run([PRISM, *args, "--json"], env=bench_env(PRISM_DATABASE_URL=database_url), cwd=cwd,
                          capture_output=True, check=False)
    try:
        out: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"prism {' '.join(args)} failed ({done.returncode}): {done.stderr.decode()}") from exc
    out["exit_code"] = done.returncode
    return out


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an already sorted sequence."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, min(len(sorted_values), math.ceil(pct / 100 * len(sorted_values))))
    return sorted_values[rank - 1]


def write_result(stem: str, data: Mapping[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{stem}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path
