# Sourced by bin/prism, bin/test and bin/lock: make sure .venv exists with Prism installed — the exact versions
# of the lock file (requirements.lock, or requirements-dev.lock when asked for dev), then Prism itself without
# resolving anything again (--no-deps).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
kind="${1:-runtime}"
stamp="$venv/.installed-$kind"
lock="$root/requirements.lock"
[ "$kind" = dev ] && lock="$root/requirements-dev.lock"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
  pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
  "${pip[@]}" --upgrade pip >/dev/null
  "${pip[@]}" -r "$lock"
  if [ "$kind" = dev ]; then
    "${pip[@]}" --no-deps -e "$root" -e "$root/examples/shipping_rates"
  else
    "${pip[@]}" --no-deps -e "$root"
  fi
  touch "$stamp"
fi
# Prism's own modules are compiled once here. Installed in editable mode, they are otherwise compiled from source
# by every process that imports them whenever PYTHONDONTWRITEBYTECODE is set: a quarter of each `prism` command's
# start-up, paid again by every command and server the test suite starts. Up-to-date files are skipped.
"$venv/bin/python" -m compileall -q -j 0 "$root/src" >/dev/null
