"""Where a governed dispatch spends its time: py-spy samples `prism serve` under the dispatch load.

    python bench/profile_dispatch.py [--seconds 20] [--connections 32] [--database-url postgresql://...]

Writes a flame graph (SVG) and the collapsed stacks to bench/results/, and prints the functions with
the most samples, inclusive ("in it or below") and self ("on top of the stack"). Needs py-spy.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.dispatch import TOOL_PATH, capture
from bench.harness import RESULTS, start_prism
from bench.loadgen import write_post_script
from bench.pgdb import throwaway_database


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--database-url", default=None, help="a throwaway postgresql://.../prism_bench* database")
    p.add_argument("--native", action="store_true",
                   help="also sample C frames (shows garbage collection, syscalls and driver time by name)")
    return p.parse_args()


def frame_name(frame: str) -> str:
    """`func (path/to/file.py:123)` -> `func (path/to/file.py)`: lines would split one function apart."""
    head, _, location = frame.partition(" (")
    return f"{head} ({location.rsplit(':', 1)[0]})" if location else head


def rank(collapsed: Path, top: int) -> str:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = [frame_name(f) for f in stack.split(";")[1:]]  # the first frame is the thread
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
    lines = [f"{total} samples (all threads)", "", "inclusive %  function"]
    lines += [f"{100 * n / total:6.1f}  {name}" for name, n in inclusive.most_common(top)]
    lines += ["", "self %  function"]
    lines += [f"{100 * n / total:6.1f}  {name}" for name, n in own.most_common(top)]
    by_package: Counter[str] = Counter()
    for name, n in own.items():
        by_package[package_of(name)] += n
    lines += ["", "self %  package (C code is counted in the Python frame that called it)"]
    lines += [f"{100 * n / total:6.1f}  {name}" for name, n in by_package.most_common()]
    return "\n".join(lines)


def package_of(frame: str) -> str:
    """`func (starlette/routing.py)` -> `starlette`; a top-level module names itself."""
    location = frame.rpartition(" (")[2].rstrip(")")
    return location.split("/", 1)[0].removesuffix(".py")


def sample(database_url: str, workdir: Path, out: Path, args: argparse.Namespace, py_spy: str) -> None:
    prism, banner = start_prism(database_url=database_url, cwd=workdir, log_path=workdir / "prism.log")
    try:
        prism.wait_ready()
        request_body, _ = capture(prism.base_url, banner["api_key"])
        script = write_post_script(workdir / "post.lua", url_path=TOOL_PATH, body=request_body,
                                   bearer=banner["api_key"])
        # Load for longer than the sampling window so py-spy only ever sees a loaded server.
        wrk = subprocess.Popen(["wrk", "-t1", f"-c{args.connections}", f"-d{args.seconds + 8}s", "-s", str(script),
                                prism.base_url], stdout=subprocess.DEVNULL)
        try:
            time.sleep(3)
            for fmt, suffix in (("raw", ".collapsed.txt"), ("flamegraph", ".svg")):
                subprocess.run([py_spy, "record", "--pid", str(prism.pid), "--threads", "--rate", str(args.rate),
                                "--duration", str(args.seconds // 2), "--format", fmt, "--output", str(out) + suffix,
                                *(["--native"] if args.native else [])], check=True, capture_output=True)
        finally:
            wrk.wait()
    finally:
        prism.stop()


def main() -> None:
    args = parse_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        raise SystemExit("py-spy is required: pip install py-spy")
    backend = "postgresql" if args.database_url else "sqlite"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"profile-{backend}-{stamp}"
    RESULTS.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="prism-profile-")))
        if args.database_url:
            stack.enter_context(throwaway_database(args.database_url))
        sample(args.database_url or f"sqlite:///{workdir / 'prism.db'}", workdir, out, args, py_spy)
    report = rank(Path(str(out) + ".collapsed.txt"), args.top)
    Path(str(out) + ".top.txt").write_text(report + "\n")
    print(report)
    print(f"\nflame graph: {out}.svg")


if __name__ == "__main__":
    main()
