"""The teaching notebook's Part 8 cache, ``notebooks/recordings/smollm2_experiment.jsonl``:
``make_experiment_cache.py`` ran the experiment once on the real local model through
``Fragola.cached``; sent again at a loopback URL where nothing listens, every request is a
hit (the same bodies, to the byte), at no cost, and the file is not written to."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import nbformat
import pytest

from fragola_nb import Fragola

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _maker() -> Any:
    path = NOTEBOOKS / "recordings" / "make_experiment_cache.py"
    spec = importlib.util.spec_from_file_location("make_experiment_cache", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_shipped_cache_answers_the_whole_experiment_without_a_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    maker = _maker()
    as_shipped = maker.CACHE.read_bytes()
    cache = Fragola.cached(maker.CACHE, model=maker.MODEL, base_url=maker.NOWHERE)
    try:
        evaluation = await maker.pirate_experiment(cache)
    finally:
        await cache.aclose()
    assert len(evaluation) == 60
    assert all(row.status == "done" and row.cached for row in evaluation), evaluation
    plain, pirate = evaluation.summary()
    assert [plain["cached_calls"], pirate["cached_calls"]] == [30, 30]
    assert plain["cost"] == pirate["cost"] == 0
    assert pirate["pass_rate"] > plain["pass_rate"]
    assert maker.CACHE.read_bytes() == as_shipped


def test_the_notebook_asks_what_the_maker_asked() -> None:
    """Part 8's cell of questions, prompts and settings is the maker's (a drift would make the
    notebook's replay miss: its rows would fail)."""
    maker = _maker()
    notebook = nbformat.read(NOTEBOOKS / "teaching_example.ipynb", as_version=4)  # type: ignore[no-untyped-call]
    [cell] = [c for c in notebook.cells if c.source.startswith("from fragola_nb.graders")
              and "\nquestions = [" in c.source]  # Part 9's cell imports graders too
    names: dict[str, Any] = {}
    exec(cell.source, names)
    assert names["questions"] == maker.QUESTIONS and names["prompts"] == maker.PROMPTS
    assert names["settings"] == maker.SETTINGS
    assert [g.__name__ for g in names["graders"]] == [f"regex({maker.PIRATE_WORDS!r})",
                                                       "max_tokens(120)"]
