#!/usr/bin/env bash
# Certify the pinned real ACP agents and clients and write their reports under reports/.
# Run from the repository root after `./run setup --with-peers`.  Each report records the exact
# command, the peer's own agentInfo, the schema and the verdict.
#
#   scripts/certify-real-peers.sh            # all of them
#   scripts/certify-real-peers.sh echo-agent # one (names below)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
EX="$ROOT/.peers/python-sdk-0.12.1/examples"

declare -A CMD=(
  [python-sdk-echo-agent]="$PY $EX/echo_agent.py"
  [python-sdk-agent]="$PY $EX/agent.py"
  [ts-sdk-1.9.0-example-agent]="node $ROOT/node_modules/acp-ts-sdk-1.9.0/dist/examples/agent.js"
  # Peer profiles (acp_conformance/profiles/agents.py): full turns against the scripted model
  # endpoint on 127.0.0.1, no key, no network.  Node adapters start slowly under load.
  [claude-agent-acp]="claude-agent-acp"
  [codex-acp]="codex-acp"
  [zed-codex-acp]="zed-codex-acp"
)
declare -A EXTRA=(
  [claude-agent-acp]="--acp-timeout=30"
  [codex-acp]="--acp-timeout=30"
  [zed-codex-acp]="--acp-timeout=30"
)

# Clients: the suite plays the agent ({agent} is its relay); a profile says how to drive each.
declare -A CLIENT=(
  [acpx-client]="$ROOT/node_modules/.bin/acpx {permission} --format json --agent {agent} exec {prompt}"
  [python-sdk-client]="$PY $EX/client.py {agent_argv}"
  [mock-client]="$PY -m mock_client {permission} --caps fs,terminal,elicitation-form,auth-terminal --agent {agent} --prompt {prompt}"
)
declare -A PROFILE=(
  [acpx-client]="acpx"
  [python-sdk-client]="python-sdk-client"
  [mock-client]="mock-client"
)

run_one() {
  local role="$1" name="$2" cmd="$3"; shift 3
  echo "==> $name: $cmd" >&2
  local work; work="$(mktemp -d)"
  # --basetemp: pytest's default (<tmp>/pytest-of-<user>/pytest-<n>) names the user, and a peer
  # that streams a path in pieces splits it where per-frame redaction cannot see it whole.
  ( cd "$work" && "$PY" -m pytest -p no:cacheprovider -q -n 2 --basetemp="$work/run" --acp-"$role"="$cmd" \
      --acp-report-json="$ROOT/reports/$name.json" "$@" ) | tail -n 3 || true
  rm -rf "$work"
}

want="${1:-all}"
for name in "${!CMD[@]}"; do
  # shellcheck disable=SC2086  # EXTRA holds whole options, split on purpose
  if [ "$want" = all ] || [ "$want" = "$name" ]; then run_one agent "$name" "${CMD[$name]}" ${EXTRA[$name]:-}; fi
done
for name in "${!CLIENT[@]}"; do
  if [ "$want" = all ] || [ "$want" = "$name" ]; then
    run_one client "$name" "${CLIENT[$name]}" --acp-client-profile="${PROFILE[$name]}"
  fi
done
