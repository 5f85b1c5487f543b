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
