#!/usr/bin/env bash
# One command: make bench/.venv (once), install fragola_nb and the peers, run everything,
# print the markdown table and write bench/results.md (the panel in a real browser
# last).   bench/run.sh [--quick]
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
"$venv/bin/python" "$here/run.py" "$@"
# agent.batch against a bare gather and openai-agents (bench/batch.py): its own section.
if [ "${1:-}" = "--quick" ]; then
    "$venv/bin/python" "$here/batch.py" --inputs 200 --rounds 1
else
    "$venv/bin/python" "$here/batch.py"
fi
# agent.evaluate with graders against the same runs as agent.batch (bench/evaluate.py).
if [ "${1:-}" = "--quick" ]; then
    "$venv/bin/python" "$here/evaluate.py" --cases 200 --rounds 1
else
    "$venv/bin/python" "$here/evaluate.py"
fi
# The Ray backend of agent.batch (bench/ray_batch.py): Ray from the project's own venv when
# it has the ray extra, else the extra goes into bench/.venv (once).
py="$root/.venv/bin/python"
if ! { [ -x "$py" ] && "$py" -c "import ray, fragola_nb" 2>/dev/null; }; then
    py="$venv/bin/python"
    if ! "$py" -c "import ray" 2>/dev/null \
            && ! "$venv/bin/pip" install -q -e "$root[ray]" >> "$venv/install.log" 2>&1; then
        cat "$venv/install.log" >&2
        exit 1
    fi
fi
if [ "${1:-}" = "--quick" ]; then
    "$py" "$here/ray_batch.py" --quick
else
    "$py" "$here/ray_batch.py"
fi
# Panel in the browser (bench/panel_browser.py): JupyterLab and Playwright come from the
# project's own venv (the `test` extra), the browser is Debian's chromium; it adds its
# section to the results.md that run.py has just written.
py="$root/.venv/bin/python"
if [ -x "$py" ] && "$py" -c "import jupyterlab, playwright" 2>/dev/null \
        && [ -x "${E2E_CHROMIUM:-/usr/bin/chromium}" ]; then
    "$py" "$here/panel_browser.py" "$@"
else
    echo "skipped: Panel in the browser (needs $py with the test extra and chromium)" >&2
fi
