"""The layers depend only downward (issue 22): ``.importlinter``'s contracts hold, they fail
when an upward import is added (inside a function too), and importing a layer loads no module
of the layers above it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())"]
LAYERS = ["base", "models", "core", "sessions", "presets", "experiments", "notebook"]
ABOVE = {
    "base": LAYERS[1:],
    "models": LAYERS[2:],
    "core": ["sessions", "presets", "experiments", "notebook"],
    "sessions": ["presets", "experiments", "notebook"],
    "presets": ["sessions", "experiments", "notebook"],
    "experiments": ["notebook"],
}


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the copy's fragola_nb, not the installed one
    return subprocess.run([*LINT, "--config", str(root / ".importlinter"), "--no-cache"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_every_contract_is_kept() -> None:
    run = lint(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    for name in ("Layers depend only downward", "Sessions and presets do not know each other",
                 "The openai client and its HTTP stack live in models",
                 "mcp and OpenTelemetry live in presets", "Ray lives in experiments.ray",
                 "The Jupyter stack lives in notebook",
                 "Comparisons and batches do not know each other",
                 "The shared module and the graders know no family above them"):
        assert f"{name} KEPT" in run.stdout, run.stdout


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "fragola_nb", tmp_path / "fragola_nb",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


@pytest.mark.parametrize(("module", "added", "broken"), [
    # an import inside a function counts as much as one at the top
    ("core/run/loop.py", "def _peek() -> None:\n    from fragola_nb.notebook import panel\n",
     "fragola_nb.core is not allowed to import fragola_nb.notebook"),
    ("base/render.py", "import fragola_nb.core.agent\n",
     "fragola_nb.base is not allowed to import fragola_nb.core"),
    ("sessions/export.py", "from fragola_nb.presets import guardrails\n",
     "fragola_nb.sessions is not allowed to import fragola_nb.presets"),
    ("core/agent.py", "import openai\n", "fragola_nb.core is not allowed to import openai"),
    ("experiments/batch/run.py", "import ray\n",
     "fragola_nb.experiments.batch is not allowed to import ray"),
    ("presets/tracing.py", "import IPython\n",
     "fragola_nb.presets is not allowed to import IPython"),
    # inside experiments: the graders under the families, comparisons apart from batches
    ("experiments/graders/base.py", "def _peek() -> None:\n"
     "    from fragola_nb.experiments.evaluate import evaluation\n",
     "fragola_nb.experiments.graders is not allowed to import"),  # (the report wraps here)
    ("experiments/compare/run.py", "from fragola_nb.experiments.batch import result\n",
     "fragola_nb.experiments.compare is not allowed to import"),
])
def test_an_upward_import_breaks_the_contract(copy: Path, module: str, added: str,
                                               broken: str) -> None:
    path = copy / "fragola_nb" / module
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + added, encoding="utf-8")

    run = lint(copy)

    assert run.returncode != 0, run.stdout
    assert broken in run.stdout, run.stdout


@pytest.mark.parametrize("layer", list(ABOVE))
def test_importing_a_layer_loads_nothing_above_it(layer: str) -> None:
    """Every module of the layer imported (the package face first, as Python does): no module
    of a layer above it, nor of the Jupyter stack below the notebook layer, is loaded."""
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "fragola_nb" / layer).rglob("*.py"))
    modules = [m for m in modules if not m.startswith("fragola_nb.experiments.ray.")]
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout)
    above = [m for m in loaded for up in ABOVE[layer]
             if m == f"fragola_nb.{up}" or m.startswith(f"fragola_nb.{up}.")]
    assert above == [], f"importing fragola_nb.{layer} loaded {above}"
    jupyter = [m for m in loaded if m.split(".")[0] in {"IPython", "ipywidgets", "anywidget",
                                                        "ipykernel", "traitlets"}]
    assert jupyter == [], f"importing fragola_nb.{layer} loaded {jupyter[:5]}"


def test_import_fragola_nb_loads_only_the_core_and_below() -> None:
    code = "import json, sys, fragola_nb; print(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    loaded = json.loads(run.stdout)
    upper = [m for m in loaded if m.split(".")[:2] in (
        ["fragola_nb", up] for up in ("sessions", "presets", "experiments", "notebook"))]
    assert upper == []


def test_no_compatibility_layer_and_nothing_on_the_import_path() -> None:
    """No finder for the flat layout's paths: ``import fragola_nb`` leaves ``sys.meta_path``
    as it was, and ``fragola_nb.scripted`` (a 0.x path, never released) is not a module."""
    code = ("import sys; before = list(sys.meta_path); import fragola_nb, fragola_nb.testing, "
            "fragola_nb.graders; assert sys.meta_path == before, sys.meta_path\n"
            "import importlib.util as u\n"
            "for old in ('fragola_nb.scripted', 'fragola_nb.agent', 'fragola_nb.hooks'):\n"
            "    assert u.find_spec(old) is None, old\n"
            "print('ok')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.stdout.strip() == "ok", run.stderr
    assert not (ROOT / "fragola_nb" / "_moved.py").exists()


def test_the_testing_face_names_the_scripted_model() -> None:
    import fragola_nb.models.scripted as scripted
    import fragola_nb.testing as testing

    for name in ("ScriptedModel", "reply", "call", "tool_calls", "fail", "hang"):
        assert getattr(testing, name) is getattr(scripted, name)
    assert sorted(testing.__all__) == sorted(scripted.__all__)
