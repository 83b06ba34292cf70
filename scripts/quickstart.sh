#!/usr/bin/env bash
# Set up and run the quickstart notebook offline (the scripted model answers when no
# OPENAI_API_KEY is set), then print the run as text: each code cell, what it printed, and
# each panel's conversation (not the panels' HTML). The executed notebook is saved in build/.
# .venv gets the package and the "quickstart" extra only (a kernel, nbclient, JupyterLab: no
# test tools), with no bytecode compiled ahead (Python compiles what it imports: a third of
# the install's time saved); scripts/test.sh adds the rest to the same .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=quickstart PIP_OPTIONS=--no-compile bash scripts/setup.sh
.venv/bin/python scripts/run_notebook.py notebooks/quickstart.ipynb build/quickstart.ipynb
echo "Executed notebook: build/quickstart.ipynb. In JupyterLab each panel shows as one line" \
  "(fragola_nb panel of 'calculator', 8 messages: run the cell, or trust the notebook) and a" \
  "static copy: run the cells, or trust the notebook, to see the panels (docs/panel.md)."
