#!/usr/bin/env bash
# Set up and run the whole test suite (also what CI runs). pytest exits non-zero on failure
# and with code 5 when it collected no test, so an empty run never passes.
set -euo pipefail
cd "$(dirname "$0")/.."
# The browser tests (tests/browser) drive Debian's chromium through Playwright; a browser
# downloaded by `playwright install` is never used. Without it they fail, they do not skip.
if [ ! -x /usr/bin/chromium ] && [ -z "${E2E_CHROMIUM:-}" ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi
bash scripts/setup.sh
.venv/bin/python -m ruff check fragola_nb tests
.venv/bin/python -m mypy
.venv/bin/python -m pytest -q "$@"
