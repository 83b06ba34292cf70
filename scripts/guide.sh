#!/usr/bin/env bash
# Open the user guide in JupyterLab, on copies of the notebooks: JupyterLab saves a notebook's
# outputs as it runs (autosave), and the copies take them, not the tracked files in notebooks/.
#
#   bash scripts/guide.sh            # copy notebooks/ into build/guide/ (once), open JupyterLab there
#   bash scripts/guide.sh --fresh    # copy them again first (what you ran or edited there is replaced)
#   bash scripts/guide.sh --copy     # copy only (as --fresh), and print where; JupyterLab not started
#
# build/ is ignored by git. .venv is made as scripts/quickstart.sh makes it when it has no
# JupyterLab yet. Other arguments go to `jupyter lab`.
set -euo pipefail
cd "$(dirname "$0")/.."
GUIDE=build/guide
fresh=""
copy_only=""
args=()
for arg in "$@"; do
  case "$arg" in
    --fresh) fresh=1 ;;
    --copy) fresh=1; copy_only=1 ;;
    *) args+=("$arg") ;;
  esac
done
if [ -n "$fresh" ] || [ ! -d "$GUIDE" ]; then
  rm -rf "$GUIDE"
  mkdir -p "$GUIDE"
  # The notebooks and the recordings they replay (relative paths), not their sources.
  cp notebooks/*.ipynb "$GUIDE/"
  cp -R notebooks/recordings "$GUIDE/"
  echo "Copied the user guide into $GUIDE/ (run it there; notebooks/ stays as it is)"
else
  echo "The user guide's copies in $GUIDE/ are kept (--fresh copies notebooks/ again)"
fi
[ -z "$copy_only" ] || exit 0
[ -x .venv/bin/jupyter-lab ] || EXTRAS=quickstart PIP_OPTIONS=--no-compile bash scripts/setup.sh
exec .venv/bin/jupyter lab "$GUIDE" ${args[@]+"${args[@]}"}
