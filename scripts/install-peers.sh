#!/usr/bin/env bash
# Install the real ACP peers the conformance suite runs against:
#   - npm packages pinned in package.json / package-lock.json (npm ci into node_modules/)
#   - the ACP Python SDK examples, extracted from the PyPI sdist into .peers/
# Idempotent: a second run with an unchanged lock file does nothing.
# Usage: scripts/install-peers.sh [--force]
# Env:   PYTHON   interpreter for the Python step (default: python3)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

FORCE=0
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-peers: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

PYTHON="${PYTHON:-python3}"

log() { printf 'install-peers: %s\n' "$*"; }
die() { printf 'install-peers: error: %s\n' "$*" >&2; exit 1; }

# --- npm peers ---------------------------------------------------------------
command -v node >/dev/null 2>&1 || die "node is not installed (need Node.js >= 20; e.g. 'apt-get install nodejs npm')"
command -v npm >/dev/null 2>&1 || die "npm is not installed (e.g. 'apt-get install npm')"
[[ -f package-lock.json ]] || die "package-lock.json is missing in $ROOT"

node_major="$(node -p 'process.versions.node.split(".")[0]')"
if (( node_major < 20 )); then
  die "Node.js $(node --version) is too old; need >= 20"
fi

stamp="node_modules/.acp-peers-lock.sha256"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
have="$(cat "$stamp" 2>/dev/null || true)"
bins=(claude-agent-acp codex-acp acpx)
bins_ok=1
for b in "${bins[@]}"; do
  [[ -x "node_modules/.bin/$b" ]] || bins_ok=0
done
if (( FORCE == 0 )) && [[ "$want" == "$have" ]] && (( bins_ok == 1 )) \
   && [[ -f node_modules/@agentclientprotocol/sdk/schema/v1/schema.json ]]; then
  log "node_modules up to date with package-lock.json"
else
  log "npm ci (node $(node --version), npm $(npm --version))"
  # Several peers declare engines node>=22; they run on Node 20 here, so the EBADENGINE
  # warnings are filtered out to keep the log readable.
  if ! npm ci --no-audit --no-fund 2> >(grep -v 'EBADENGINE' >&2); then
    die "npm ci failed (is the npm registry reachable? is package-lock.json in sync with package.json?)"
  fi
  printf '%s\n' "$want" > "$stamp"
fi

# --- Python SDK examples -----------------------------------------------------
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (set PYTHON=/path/to/python3)"
"$PYTHON" scripts/fetch_python_sdk_examples.py

if ! "$PYTHON" -c 'import acp' >/dev/null 2>&1; then
  log "note: 'import acp' fails for $PYTHON; the Python SDK examples need it:"
  log "      $PYTHON -m pip install 'agent-client-protocol==0.12.1'"
fi

log "done. Agents: node_modules/.bin/{claude-agent-acp,codex-acp};" \
    "client: node_modules/.bin/acpx;" \
    "TS SDK 1.9.0 example agent: node node_modules/acp-ts-sdk-1.9.0/dist/examples/agent.js;" \
    "Python SDK examples: .peers/python-sdk-0.12.1/examples/"
