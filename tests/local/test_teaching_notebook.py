"""The teaching notebook, run top to bottom with the real local model installed: Part 7 shows
SmolLM2's own answers to one question under three instructions, and they differ."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "teaching_example.ipynb"
PIRATE_WORDS = re.compile(r"\b(?:aye|arr+|matey|captain|pirates?|me name be|ye)\b", re.I)


def test_part_7_shows_the_real_model_answering_each_instruction_its_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # Parts 1-6 run offline as always
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()

    def printed(marker: str) -> str:
        [cell] = [c for c in notebook.cells if c.cell_type == "code" and marker in c.source]
        assert not [o for o in cell.outputs if o.output_type == "error"]
        return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")

    started = printed("real = Fragola.local()")
    assert started.startswith("A real model on this machine: SmolLM2-135M-Instruct at "
                              "http://127.0.0.1:")
    rows = printed("real_comparison = await").splitlines()
    answers = dict(row.split("| ", 1) for row in rows)
    assert [label.strip() for label in answers] == ["plain", "pirate", "french"]
    plain, pirate, french = answers.values()
    assert len({plain, pirate, french}) == 3
    assert "(scripted model)" not in plain + pirate + french  # the real model answered
    assert PIRATE_WORDS.search(pirate) and not PIRATE_WORDS.search(plain)
    assert re.search(r"\b(?:je|bonjour|le|la|suis)\b", french, re.I)
