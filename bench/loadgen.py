"""wrk driven from Python: one POST request script, exact percentiles read back from its `done` hook."""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.harness import pinned

# wrk's own text report rounds percentiles to two decimals of the display unit; the `done` hook reads
# them from the HdrHistogram in microseconds instead. Status errors count answers outside 2xx/3xx.
_DONE_HOOK = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH_JSON {\\"requests\\":%d,\\"duration_us\\":%d,\\"bytes\\":%d,\\"connect_errors\\":%d,"
    .. "\\"read_errors\\":%d,\\"write_errors\\":%d,\\"status_errors\\":%d,\\"timeouts\\":%d,"
    .. "\\"p50_us\\":%d,\\"p90_us\\":%d,\\"p99_us\\":%d,\\"p999_us\\":%d,\\"max_us\\":%d,\\"mean_us\\":%.1f}\\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.max, latency.mean))
end
"""


@dataclass(frozen=True)
class LoadResult:
    requests: int
    duration_us: int
    bytes: int
    connect_errors: int
    read_errors: int
    write_errors: int
    status_errors: int
    timeouts: int
    p50_us: int
    p90_us: int
    p99_us: int
    p999_us: int
    max_us: int
    mean_us: float

    @property
    def rps(self) -> float:
        return self.requests / (self.duration_us / 1e6)

    @property
    def errors(self) -> int:
        return self.connect_errors + self.read_errors + self.write_errors + self.status_errors + self.timeouts

    def summary(self) -> dict[str, float | int]:
        return {**asdict(self), "rps": round(self.rps, 1), "errors": self.errors}


def lua_long_string(text: str) -> str:
    """A Lua long-bracket literal that cannot be closed early by the text itself."""
    level = 0
    while f"]{'=' * level}]" in text:
        level += 1
    return f"[{'=' * level}[{text}]{'=' * level}]"


def write_post_script(path: Path, *, url_path: str, body: bytes, bearer: str) -> Path:
    lines = [
        'wrk.method = "POST"',
        f"wrk.path = {lua_long_string(url_path)}",
        f"wrk.body = {lua_long_string(body.decode())}",
        'wrk.headers["Content-Type"] = "application/json"',
        f'wrk.headers["Authorization"] = {lua_long_string("Bearer " + bearer)}',
        _DONE_HOOK,
    ]
    path.write_text("\n".join(lines))
    return path


def run_wrk(base_url: str, script: Path, *, connections: int, threads: int, duration: float,
            cpus: str | None = None, raw_log: Path | None = None) -> LoadResult:
    """One wrk run with --latency; its raw report is appended to `raw_log`."""
    command = pinned(["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration:g}s", "--timeout", "10s",
                      "--latency", "-s", str(script), base_url], cpus)
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    if raw_log is not None:
        with raw_log.open("a") as log:
            log.write(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}\n")
    for line in done.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            return LoadResult(**json.loads(line.removeprefix("BENCH_JSON ")))
    raise RuntimeError(f"wrk printed no summary:\n{done.stdout}\n{done.stderr}")
