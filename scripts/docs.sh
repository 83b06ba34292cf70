#!/usr/bin/env bash
# The docs site (mkdocs.yml, docs/): the manual, the API pages generated from the docstrings,
# and the user guide's notebooks rendered.
#
#   bash scripts/docs.sh          # serve it on http://127.0.0.1:8000 (DOCS_PORT=8001 for another
#                                 # port), rebuilt when a page, a docstring or a notebook changes
#   bash scripts/docs.sh build    # build it into site/ with --strict: any warning (a broken link,
#                                 # anchor or API reference) fails, as in tests/test_docs.py
#
# Served on loopback only. Needs .venv with the "docs" extra (the "test" extra includes it);
# when .venv has no mkdocs, scripts/setup.sh installs the extra first.
set -euo pipefail
cd "$(dirname "$0")/.."
export NO_MKDOCS_2_WARNING=1  # mkdocs-material's notice about MkDocs 2, on every run
if [ ! -x .venv/bin/mkdocs ]; then
  EXTRAS=docs bash scripts/setup.sh
fi
case "${1:-serve}" in
  serve) exec .venv/bin/mkdocs serve --strict --dev-addr "127.0.0.1:${DOCS_PORT:-8000}" ;;
  build) exec .venv/bin/mkdocs build --strict --site-dir site ;;
  *) echo "usage: bash scripts/docs.sh [serve|build]" >&2; exit 2 ;;
esac
