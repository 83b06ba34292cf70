"""pyproject.toml states one Python floor everywhere, in the current metadata format, and the
kernels the tests start run the Python the tests run on (so CI's runs on 3.12 and 3.13 test
the notebook layer on those versions, not on whatever ``python3`` a kernelspec names)."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from support.kernel_harness import Kernel

ROOT = Path(__file__).resolve().parents[2]


def pyproject() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_one_python_floor_for_install_lint_and_types() -> None:
    config = pyproject()
    floor = re.fullmatch(r">=(\d+)\.(\d+)", config["project"]["requires-python"])
    assert floor, config["project"]["requires-python"]
    major, minor = map(int, floor.groups())

    assert (major, minor) >= (3, 11)  # httpx2>=2.16 needs 3.11
    assert config["tool"]["ruff"]["target-version"] == f"py{major}{minor}"
    assert config["tool"]["mypy"]["python_version"] == f"{major}.{minor}"
    versions = [c.rsplit(" ", 1)[1] for c in config["project"]["classifiers"]
                if re.fullmatch(r"Programming Language :: Python :: \d+\.\d+", c)]
    assert versions[0] == f"{major}.{minor}"  # scripts/test.sh tests each of these
    assert versions == [f"3.{n}" for n in range(minor, minor + len(versions))]


def test_the_license_is_an_spdx_string_that_setuptools_reads() -> None:
    config = pyproject()

    assert config["project"]["license"] == "MIT"
    assert not any(c.startswith("License ::") for c in config["project"]["classifiers"])
    setuptools = next(r for r in config["build-system"]["requires"] if r.startswith("setuptools"))
    assert setuptools == "setuptools>=77"  # the first to read the SPDX form (PEP 639)


def test_a_kernel_started_by_the_tests_runs_this_python() -> None:
    with Kernel() as kernel:
        assert kernel.eval("__import__('sys').version_info[:3]") == list(sys.version_info[:3])
        assert kernel.eval("__import__('sys').prefix") == sys.prefix
