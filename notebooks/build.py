"""Write each notebook, ``notebooks/<name>.ipynb``, from its source, ``notebooks/src/<name>.py``.

The notebooks are this script's output: edit a source, then run

    .venv/bin/python notebooks/build.py          # rewrite the notebooks
    .venv/bin/python notebooks/build.py --check  # exit 1 if a notebook differs from its source

A source is a notebook in jupytext's percent format, a Python file linted and type-checked
with the code (scripts/test.sh: ``ruff check notebooks/src`` and
``mypy --config-file notebooks/mypy.ini``):

- ``# %% [markdown]`` starts a markdown cell (its lines are comments), ``# %%`` a code cell;
- a line magic is a comment in the source (``# %load_ext fragola_nb``);
- a cell that is not Python (``%%fragola AGENT`` and its message) is marked
  ``# %% active="ipynb"``: all its lines are comments in the source, code in the notebook;
- a cell marked ``# %% active="py"`` is left out of the notebook: it is there for ruff and
  mypy (a file's ``# ruff: noqa`` line; what a ``%%fragola`` cell binds, in Python).

Notebooks are written without outputs and with stable cell ids (the notebook's name and the
cell's index), so a rebuild changes only what was edited. Each must run offline top to bottom
(``tests/test_notebooks.py`` executes them all with a real kernel).
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import nbformat

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


def in_notebook(cell: nbformat.NotebookNode) -> bool:
    """Not a cell that jupytext keeps active in the script only (``active="py"``)."""
    active = cell.metadata.get("active")
    return active is None or "ipynb" in active.split(",")


def build(source: Path) -> nbformat.NotebookNode:
    """The notebook of one source: its cells (less the script-only ones), with no metadata
    but stable ids."""
    name = source.stem
    read = jupytext.reads(source.read_text(encoding="utf-8"), fmt="py:percent")
    notebook = nbformat.v4.new_notebook(metadata=METADATA)
    for index, cell in enumerate(c for c in read.cells if in_notebook(c)):
        if cell.cell_type == "markdown":
            made = nbformat.v4.new_markdown_cell(cell.source)
        else:
            made = nbformat.v4.new_code_cell(cell.source)
        made.id = f"{name.replace('_', '-')[:40]}-{index:02d}"
        notebook.cells.append(made)
    nbformat.validate(notebook)
    return notebook


def sources(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """What a notebook says: each cell's type and source. Outputs, execution counts and
    metadata are left out, so a notebook a teacher ran and saved in place is not "out of
    date" (its cells are still the source's), while an edited cell is."""
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    built = sorted(SOURCES.glob("*.py"))
    for source in built:
        path = HERE / f"{source.stem}.ipynb"
        notebook = build(source)
        if check:
            if not path.exists() or sources(nbformat.read(path, as_version=4)) != sources(
                    notebook):
                stale.append(path.name)
        else:
            path.write_text(nbformat.writes(notebook) + "\n", encoding="utf-8")
            print(f"wrote {path.relative_to(HERE.parent)}")
    orphans = sorted({p.stem for p in HERE.glob("*.ipynb")} - {s.stem for s in built})
    if orphans:
        print(f"no source in notebooks/src/ for: {', '.join(f'{n}.ipynb' for n in orphans)}",
              file=sys.stderr)
        return 1
    if stale:
        print(f"out of date (run notebooks/build.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
