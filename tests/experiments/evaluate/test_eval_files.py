"""``Evaluation.save`` and ``Evaluation.load`` on files a person edited or planted: load's
error is the documented ``BadUsage`` naming the file, whatever the header holds; save writes
with the sessions' atomic writer (no stray temporary file, no link followed, a folder
refused)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fragola_nb import BadUsage
from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.evaluate.htmlview import evaluation_html
from fragola_nb.experiments.evaluate.labels import Label
from fragola_nb.graders import Grade


def evaluation() -> Any:
    from fragola_nb.experiments.evaluate.evaluation import Evaluation

    rows = [EvalRow(case=0, input="2 + 2?", variant="base", status="done", answer="4",
                    grades=(Grade("equals(4)", True), Grade("judge", True, raw_score=4,
                                                            scale=(1, 5))),
                    seconds=0.25, tags=("math",), label=Label(True, "right"),
                    tool_calls=({"name": "add", "arguments": {"a": 2}, "result": "4"},),
                    answers=("3", "4"), ended="all turns",
                    turns=("2 + 2?", "sure?"))]
    evaluation = Evaluation(rows, variants=["base"], graders=["equals(4)", "judge"],
                            repeat=1, seconds=1.5)
    evaluation.setup = {"cases": "ab12", "repeat": 1, "variants": {"base": {
        "instructions": None, "model": "m", "settings": {}, "tools": {}, "graders": []}}}
    return evaluation


def saved(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    path = evaluation().save(tmp_path / "run.json")
    return path, json.loads(path.read_text())


def edited(path: Path, data: list[dict[str, Any]], field: str, value: Any) -> None:
    data[0]["run"][field] = value
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(("field", "value", "why"), [
    ("repeat", "three", "repeat is not a whole number >= 1"),
    ("repeat", [2], "repeat is not a whole number >= 1"),
    ("repeat", 1e999, "repeat is not a whole number >= 1"),  # Infinity: int() overflows
    ("repeat", 0, "repeat is not a whole number >= 1"),
    ("repeat", True, "repeat is not a whole number >= 1"),
    ("seconds", "long", "seconds is not a number >= 0"),
    ("seconds", {"s": 1}, "seconds is not a number >= 0"),
    ("seconds", float("nan"), "seconds is not a number >= 0"),
    ("variants", "base", "variants is not a list of names (strings)"),
    ("variants", 5, "variants is not a list of names (strings)"),
    ("graders", [{"name": "x"}], "graders is not a list of names (strings)"),
    ("stopped", "yes", "stopped is not true or false"),
])
def test_a_hand_edited_header_is_a_bad_usage_naming_the_file(tmp_path: Path, field: str,
                                                            value: Any, why: str) -> None:
    from fragola_nb.experiments.evaluate.evaluation import Evaluation

    path, data = saved(tmp_path)
    edited(path, data, field, value)

    with pytest.raises(BadUsage) as raised:
        Evaluation.load(path)

    assert str(raised.value) == f"{path} is not an evaluation file: its header's {why}"


JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6),
                              st.floats(allow_nan=True, allow_infinity=True)),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)


PLACES = ([("run", name) for name in ("repeat", "seconds", "variants", "graders", "stopped",
                                       "setup")]
          + [("grade", name) for name in ("passed", "score", "raw_score", "scale", "reason",
                                           "name")]
          + [("row", name) for name in ("case", "input", "variant", "repeat", "expected",
                                        "vars", "status", "answer", "error", "grades",
                                        "seconds", "usage", "judge_usage", "tags", "label",
                                        "tool_calls", "model_calls", "answers", "ended",
                                        "turns", "user_usage", "cached")])


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.sampled_from(PLACES), JSON), min_size=1, max_size=2))
def test_whatever_a_file_holds_load_reads_it_or_says_why_in_one_bad_usage(
        tmp_path: Path, edits: list[tuple[tuple[str, str], Any]]) -> None:
    from fragola_nb.experiments.evaluate.evaluation import Evaluation

    path, data = saved(tmp_path)
    places = {"run": data[0]["run"], "grade": data[0]["grades"][1], "row": data[0]}
    for (place, name), value in edits:
        places[place][name] = value
    path.write_text(json.dumps(data))

    try:
        loaded = Evaluation.load(path)
    except BadUsage as exc:
        assert str(path) in str(exc)
    else:  # what it read back can be shown, summed up and saved again
        assert repr(loaded) and isinstance(loaded.summary(), list) and loaded.table()
        assert evaluation_html(loaded) and repr(loaded.diff(loaded))
        again = Evaluation.load(loaded.save(tmp_path / "again.json"))
        assert again.table() == loaded.table()
        assert again.save(tmp_path / "third.json").read_text() == (
            tmp_path / "again.json").read_text()


def test_a_key_in_a_file_written_by_hand_is_read_hidden_and_saved_hidden(tmp_path: Path) -> None:
    from fragola_nb.experiments.evaluate.evaluation import Evaluation

    path, data = saved(tmp_path)
    data[0]["input"] = {"KEY": None, "api_key": "sk-proj-abcdefghijklmnopqrstuv", "city": "Rome"}
    path.write_text(json.dumps(data))

    loaded = Evaluation.load(path)

    shown = loaded.table()[0]["input"]
    assert shown == {"KEY": "[redacted]", "api_key": "[redacted]", "city": "Rome"}
    assert "sk-proj" not in repr(loaded) + evaluation_html(loaded)
    again = Evaluation.load(loaded.save(tmp_path / "again.json"))
    assert again.table() == loaded.table()


def test_save_into_a_folder_is_a_bad_usage_and_leaves_nothing_behind(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()

    with pytest.raises(BadUsage, match="runs is a folder"):
        evaluation().save(folder)

    assert sorted(os.listdir(tmp_path)) == ["runs"] and os.listdir(folder) == []
    with pytest.raises(BadUsage, match=r"cannot write .*missing.*No such file"):
        evaluation().save(tmp_path / "missing" / "run.json")


def test_save_follows_no_link_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    from fragola_nb.experiments.evaluate.evaluation import Evaluation

    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    (tmp_path / ".run.json.tmp").symlink_to(precious)  # at the old fixed temporary name
    (tmp_path / "link.json").symlink_to(precious)      # at the path itself

    first = evaluation().save(tmp_path / "run.json")
    second = evaluation().save(tmp_path / "link.json")

    assert precious.read_text() == "keep me"
    assert not second.is_symlink() and Evaluation.load(second).table() == evaluation().table()
    assert Evaluation.load(first).table() == evaluation().table()
    assert sorted(os.listdir(tmp_path)) == [".run.json.tmp", "link.json", "precious.txt",
                                            "run.json"]
