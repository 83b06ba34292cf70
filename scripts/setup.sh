#!/usr/bin/env bash
# Make a virtual environment and install fragola_nb into it (editable, with an extra).
#
#   bash scripts/setup.sh                                  # .venv, python3, extra "test"
#   PYTHON=python3.12 VENV=.venv-3.12 EXTRAS=test-core bash scripts/setup.sh
#   EXTRAS=quickstart PIP_OPTIONS=--no-compile bash scripts/setup.sh   # scripts/quickstart.sh
#
# A venv made with another Python (or one that no longer runs), or whose last install did not
# finish, is deleted and made again: the marker file $VENV/.fragola-setup is written only after
# an install succeeded, and names the interpreter it was made with. Otherwise the install is
# run again, which is quick when nothing changed and picks up new dependencies when something did.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
EXTRAS="${EXTRAS:-test}"
MARKER="$VENV/.fragola-setup"

# The floor is pyproject.toml's requires-python (">=3.11").
floor="$(sed -n 's/^requires-python = ">=\([0-9]*\.[0-9]*\)".*/\1/p' pyproject.toml)"
[ -n "$floor" ] || { echo "scripts/setup.sh: no requires-python in pyproject.toml" >&2; exit 1; }

# Which interpreter: implementation, full version and base prefix (a venv's python reports its
# base interpreter's prefix, so a venv's python and the interpreter it was made with agree).
identify='import sys; print(sys.implementation.name, "%d.%d.%d" % sys.version_info[:3], sys.base_prefix)'
if ! want="$("$PY" -c "$identify" 2>/dev/null)"; then
  echo "scripts/setup.sh: cannot run '$PY'; set PYTHON to a Python $floor or newer" >&2
  exit 1
fi
if ! "$PY" -c "import sys; sys.exit(sys.version_info < tuple(map(int, '$floor'.split('.'))))"; then
  echo "scripts/setup.sh: fragola_nb needs Python $floor or newer; '$PY' is $(echo "$want" \
    | cut -d' ' -f2). Run it again with PYTHON=/path/to/python$floor (or newer)." >&2
  exit 1
fi

have=""
if [ -x "$VENV/bin/python" ]; then
  have="$("$VENV/bin/python" -c "$identify" 2>/dev/null || true)"
fi
reason=""
if [ ! -e "$VENV" ]; then
  reason="none yet"
elif [ -z "$have" ]; then
  reason="its python does not run"
elif [ "$have" != "$want" ]; then
  reason="it was made with $(echo "$have" | cut -d' ' -f2) ($(echo "$have" | cut -d' ' -f3-)), not $(echo "$want" | cut -d' ' -f2) ($(echo "$want" | cut -d' ' -f3-))"
elif [ ! -f "$MARKER" ]; then
  reason="its last install did not finish"
fi
if [ -n "$reason" ]; then
  echo "scripts/setup.sh: making $VENV with $PY, Python $(echo "$want" | cut -d' ' -f2) ($reason)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
rm -f "$MARKER"
# setuptools says at every editable install of a flat layout that a folder named like the
# package may shadow it; that is the point of an editable install here, so it is not shown.
PYTHONWARNINGS="ignore:Editable installation" \
  "$VENV/bin/python" -m pip install -q ${PIP_OPTIONS:-} -e ".[$EXTRAS]"
echo "$want" > "$MARKER"
