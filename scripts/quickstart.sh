#!/usr/bin/env bash
# Set up and run the quickstart notebook offline (the scripted model answers when no
# OPENAI_API_KEY is set), then print the executed notebook as text.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p build
.venv/bin/jupyter nbconvert --to notebook --execute notebooks/quickstart.ipynb \
  --output-dir build --output quickstart.ipynb
.venv/bin/jupyter nbconvert --to markdown --stdout build/quickstart.ipynb 2>/dev/null
echo "Executed notebook: build/quickstart.ipynb"
