# Sourced by bin/prism and bin/test: make sure .venv exists with Prism installed (dev extras when asked).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.installed-${1:-runtime}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  if [ "${1:-runtime}" = dev ]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$root[dev]" -e "$root/examples/shipping_rates"
  else
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$root"
  fi
  touch "$stamp"
fi
