"""The exported names say their face as their module (issue 35, item 3): every class and
function in ``__all__`` of ``fragola_nb``, ``fragola_nb.graders`` and ``fragola_nb.testing``
has ``__module__`` == that face (``Grade`` and ``GradedRow``, which both export, say
``fragola_nb``), and pickle, which finds a class by ``__module__`` and ``__qualname__``, gets
the same object back. Constants (``EVENT_NAMES``, ``SCRIPT_HEADER``) and type aliases have no
module of their own and are left out."""

from __future__ import annotations

import importlib
import pickle
import types

import pytest

FACES = ("fragola_nb", "fragola_nb.graders", "fragola_nb.testing")
TOP = importlib.import_module("fragola_nb")


def exported(face: str) -> list[tuple[str, object]]:
    module = importlib.import_module(face)
    return [(name, getattr(module, name)) for name in module.__all__
            if isinstance(getattr(module, name), (type, types.FunctionType))]


@pytest.mark.parametrize("face", FACES)
def test_each_exported_name_says_its_face(face: str) -> None:
    names = exported(face)
    assert len(names) > 15
    wrong = [f"{name}: {value.__module__}" for name, value in names
             if value.__module__ != ("fragola_nb" if name in TOP.__all__ else face)]
    assert wrong == []


@pytest.mark.parametrize("face", FACES)
def test_pickle_finds_each_exported_name_at_its_face(face: str) -> None:
    for name, value in exported(face):
        assert pickle.loads(pickle.dumps(value)) is value, name


def test_an_error_and_a_grade_show_the_face() -> None:
    from fragola_nb import BadUsage
    from fragola_nb.graders import contains

    assert repr(BadUsage) == "<class 'fragola_nb.BadUsage'>"
    assert contains.__module__ == "fragola_nb.graders"
