#!/usr/bin/env bash
# Run the ACP conformance suite as a CI gate: what action.yml (GitHub) and the GitLab CI snippet in
# docs/ci.md both call, so the gate behaves the same everywhere and can be tried locally.
#
# Environment (the action's inputs):
#   ACP_AGENT or ACP_CLIENT   the command to certify (exactly one)
#   ACP_BASELINE              optional expected-failures file (--acp-baseline)
#   ACP_REPORT_DIR            where report.json, report.md and junit.xml go (default acp-reports)
#   ACP_ARGS                  extra pytest arguments, shell-split (e.g. "-n auto --acp-timeout=30")
#   PYTHON                    the interpreter with acp-conformance installed (default python3)
# Writes the Markdown report to $GITHUB_STEP_SUMMARY when that is set; exits with the suite's status.
set -uo pipefail
PY="${PYTHON:-python3}"
DIR="${ACP_REPORT_DIR:-acp-reports}"
if [ -n "${ACP_AGENT:-}" ] && [ -n "${ACP_CLIENT:-}" ]; then
  echo "ci-gate: set agent or client, not both" >&2; exit 2
fi
if [ -n "${ACP_AGENT:-}" ]; then target=(--acp-agent="$ACP_AGENT")
elif [ -n "${ACP_CLIENT:-}" ]; then target=(--acp-client="$ACP_CLIENT")
else echo "ci-gate: set agent (ACP_AGENT) or client (ACP_CLIENT): the command to certify" >&2; exit 2; fi
extra=()
if [ -n "${ACP_BASELINE:-}" ]; then extra+=(--acp-baseline="$ACP_BASELINE"); fi
# shellcheck disable=SC2206  # ACP_ARGS holds whole options, split on purpose
if [ -n "${ACP_ARGS:-}" ]; then extra+=(${ACP_ARGS}); fi
mkdir -p "$DIR"
"$PY" -m pytest -p no:cacheprovider "${target[@]}" \
  --acp-report-json="$DIR/report.json" --acp-report-junit="$DIR/junit.xml" "${extra[@]}"
status=$?
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$DIR/report.md" ]; then
  cat "$DIR/report.md" >> "$GITHUB_STEP_SUMMARY"
fi
exit "$status"
