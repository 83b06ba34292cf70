"""Run a notebook offline in a real kernel, save the executed copy, and print the run as text.

    .venv/bin/python scripts/run_notebook.py notebooks/quickstart.ipynb build/quickstart.ipynb

What is printed is what a person reads in the notebook: each section's heading, each code
cell and its text outputs (printed lines, the text form of each result and panel, errors).
A panel's static copy (the HTML shown to viewers without widgets: nbconvert, GitHub) is
printed as its text, never as markup: in a terminal that markup is hundreds of lines
(``nbconvert --to markdown`` printed 560 lines for the quickstart). The executed notebook,
with everything, is saved for JupyterLab.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

ANSI = re.compile(r"\x1b\[[0-9;]*m")


WIDGET = "application/vnd.jupyter.widget-view+json"
COPY = 'class="fragola-static-copy"'  # a live view's copy (fragola_nb/notebook/static/copy.py)
BLOCKS = {"div", "p", "br", "details", "summary", "pre", "li", "tr", "table", "h1", "h2", "h3",
          "h4", "ul", "ol", "section"}


class _Text(HTMLParser):
    """The text of static HTML: what a browser would show, one block a line; no style or
    script, no markup."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script"):
            self.hidden += 1
        elif tag in BLOCKS:
            self.parts.append("\n")
        elif tag == "td":
            self.parts.append("  ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self.hidden = max(0, self.hidden - 1)
        elif tag in BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def html_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    parser.close()
    lines = (line.rstrip() for line in "".join(parser.parts).splitlines())
    return "\n".join(f"  {line}" for line in lines if line.strip())


def output_text(output: Any) -> str:
    """The text of one output: a stream's, a result's or display's text/plain, an error's
    name, message and traceback (without terminal colours). A live view (a panel) has, as
    its text/plain, one line saying what it is and how to see it live; its static copy, the next output (or, in a notebook made
    by an earlier version, the view's own text/html), holds the run (the turn's messages, the
    tool calls and results), printed here as text in the view's place."""
    kind = output.get("output_type")
    if kind == "stream":
        return str(output.get("text", ""))
    if kind in ("execute_result", "display_data"):
        data = output.get("data", {})
        html = str(data.get("text/html") or "")
        if WIDGET in data:
            return html_text(html) if html else ""
        if COPY in html:
            return html_text(html)
        return str(data.get("text/plain", ""))
    if kind == "error":
        return ANSI.sub("", "\n".join(output.get("traceback", [])))
    return ""


def as_text(notebook: Any) -> str:
    """The executed notebook as a person reads it, in plain text."""
    parts: list[str] = []
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            parts += [line for line in cell.source.splitlines() if line.startswith("#")]
        elif cell.cell_type == "code" and cell.source.strip():
            count = cell.get("execution_count") or " "
            parts.append(f"In [{count}]:")
            parts += [f"    {line}" for line in cell.source.splitlines()]
            texts = [output_text(o).rstrip("\n") for o in cell.get("outputs", [])]
            parts += [text for text in texts if text]
            parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: run_notebook.py NOTEBOOK EXECUTED_COPY", file=sys.stderr)
        return 2
    source, target = Path(argv[0]), Path(argv[1])
    notebook = nbformat.read(source, as_version=4)
    NotebookClient(notebook, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(source.parent.resolve())}}).execute()
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    sys.stdout.write(as_text(notebook))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
