#!/usr/bin/env bash
# One command: make bench/.venv (once), install fragola_nb and the peers, run everything,
# print the markdown table and write bench/results.md.   bench/run.sh [--quick]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q -U pip
fi
# Quiet and idempotent: a second run only checks that everything is there.
if ! "$venv/bin/pip" install -q -e "$root" openai-agents "pydantic-ai-slim[openai]" pyinstrument \
        > "$venv/install.log" 2>&1; then
    cat "$venv/install.log" >&2
    exit 1
fi
exec "$venv/bin/python" "$here/run.py" "$@"
