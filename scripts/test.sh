#!/usr/bin/env bash
# Set up and run the whole test suite (also what CI runs). pytest exits non-zero on failure
# and with code 5 when it collected no test, so an empty run never passes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m ruff check fragola_nb tests
.venv/bin/python -m mypy
.venv/bin/python -m pytest -q "$@"
