"""scripts/setup.sh rebuilds a venv made with another Python or left half-installed.

The script runs for real, in a copy of the project's layout, with a fake interpreter in place of
Python (a process boundary): it answers the script's ``-c`` probes as the Python it pretends to
be, makes a venv whose ``bin/python`` is another fake of the same version, and records each
``pip install`` instead of reaching the package index.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE = '''#!{python}
"""A fake Python {{version}}: enough of one for scripts/setup.sh."""
import os, sys
from pathlib import Path

here = Path(__file__).resolve().parent
version = (here / "fake-version").read_text().strip()
args = sys.argv[1:]
if args[:1] == ["-c"]:
    major, minor, micro = map(int, version.split("."))
    sys.version_info = (major, minor, micro)
    sys.base_prefix = "/opt/python/" + version
    exec(args[1])
elif args[:2] == ["-m", "venv"]:
    bin_dir = Path(args[2], "bin")
    bin_dir.mkdir(parents=True)
    for name in ("python", "fake-version"):
        (bin_dir / name).write_bytes((here / name).read_bytes())
    (bin_dir / "python").chmod(0o755)
elif args[:3] == ["-m", "pip", "install"]:
    with open(here / "pip-log", "a") as log:
        log.write(" ".join(args[3:]) + "\\n")
    sys.exit(int(os.environ.get("FAKE_PIP_STATUS", "0")))
else:
    sys.exit("fake python: unexpected " + repr(args))
'''


def make_python(where: Path, version: str) -> Path:
    where.mkdir(parents=True)
    python = where / "python"
    python.write_text(FAKE.format(python=sys.executable))
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    (where / "fake-version").write_text(version)
    return python


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def setup(root: Path, python: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=root, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHON": str(python), **env},
    )


def pip_log(root: Path) -> list[str]:
    log = root / ".venv" / "bin" / "pip-log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_new_venv_is_made_and_marked_after_the_install(tmp_path: Path) -> None:
    root = project(tmp_path)
    python = make_python(tmp_path / "py3.11", "3.11.7")

    done = setup(root, python)

    assert done.returncode == 0, done.stderr
    assert "making .venv" in done.stdout and "none yet" in done.stdout
    assert pip_log(root) == ["-q --upgrade pip", '-q -e .[test]']
    assert (root / ".venv" / ".fragola-setup").read_text().split()[1] == "3.11.7"


def test_a_complete_venv_is_kept_and_only_installed_into_again(tmp_path: Path) -> None:
    root = project(tmp_path)
    python = make_python(tmp_path / "py3.11", "3.11.7")
    setup(root, python)

    again = setup(root, python, VENV=".venv", EXTRAS="test-core")

    assert again.returncode == 0, again.stderr
    assert "making" not in again.stdout
    assert pip_log(root)[-1] == "-q -e .[test-core]"
    assert (root / ".venv" / ".fragola-setup").exists()


def test_a_venv_made_with_another_python_is_rebuilt(tmp_path: Path) -> None:
    root = project(tmp_path)
    setup(root, make_python(tmp_path / "py3.12", "3.12.1"))

    done = setup(root, make_python(tmp_path / "py3.11", "3.11.7"))

    assert done.returncode == 0, done.stderr
    assert "it was made with 3.12.1" in done.stdout and "not 3.11.7" in done.stdout
    assert (root / ".venv" / "bin" / "fake-version").read_text() == "3.11.7"
    assert pip_log(root) == ["-q --upgrade pip", "-q -e .[test]"]  # a new venv, a new log


def test_a_venv_whose_install_failed_is_rebuilt_next_time(tmp_path: Path) -> None:
    root = project(tmp_path)
    python = make_python(tmp_path / "py3.11", "3.11.7")

    failed = setup(root, python, FAKE_PIP_STATUS="1")
    assert failed.returncode != 0
    assert not (root / ".venv" / ".fragola-setup").exists()

    done = setup(root, python)

    assert done.returncode == 0, done.stderr
    assert "its last install did not finish" in done.stdout
    assert pip_log(root) == ["-q --upgrade pip", "-q -e .[test]"]


def test_a_venv_whose_python_no_longer_runs_is_rebuilt(tmp_path: Path) -> None:
    root = project(tmp_path)
    python = make_python(tmp_path / "py3.11", "3.11.7")
    setup(root, python)
    (root / ".venv" / "bin" / "python").write_text("#!/bin/sh\nexit 127\n")

    done = setup(root, python)

    assert done.returncode == 0, done.stderr
    assert "its python does not run" in done.stdout


def test_a_python_below_the_floor_is_refused_with_what_to_do(tmp_path: Path) -> None:
    root = project(tmp_path)

    done = setup(root, make_python(tmp_path / "py3.10", "3.10.13"))

    assert done.returncode == 1
    assert "needs Python 3.11 or newer" in done.stderr and "3.10.13" in done.stderr
    assert "PYTHON=" in done.stderr
    assert not (root / ".venv").exists()
