"""The README's snippets run as pasted: every ``python`` block, and every notebook block (a
``%load_ext``/``%%fragola`` cell), in order, in one real kernel, offline (no OPENAI_API_KEY:
the scripted model answers). A block that raises fails the test with its text. The shell
block at the top is what CI runs, every path the README names exists, and it stays short:
the manual is the docs site (docs/, tests/test_docs.py). The rules for reading and running
blocks are tests/support/doc_snippets.py's, the same for the docs pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.doc_snippets import (
    DOCS,
    README,
    ROOT,
    blocks,
    broken_anchors,
    headings,
    missing_paths,
    run_offline,
)

MAX_LINES = 200
"""What a newcomer reads in the first ten minutes; the rest is in docs/."""


def test_the_readme_has_snippets_to_run() -> None:
    runnable = [b for b in blocks(README) if b.runs_offline]

    assert len(runnable) >= 4
    assert any(b.text.startswith("%%fragola") for b in runnable)


def test_its_snippets_run_in_order_in_a_kernel_offline(tmp_path: Path) -> None:
    assert run_offline(README, tmp_path) >= 4


def test_the_first_commands_are_the_quickstart_and_what_ci_runs() -> None:
    first = blocks(README)[0]
    commands = [line.split("#")[0].strip() for line in first.text.splitlines()]

    assert first.lang == "bash"
    assert commands == ["bash scripts/quickstart.sh", "bash scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "exec bash scripts/test.sh\n" in ci


def test_it_is_short_and_says_where_the_docs_are() -> None:
    text = README.read_text(encoding="utf-8")

    assert len(text.splitlines()) <= MAX_LINES
    assert "bash scripts/docs.sh" in text
    assert "](docs/index.md)" in text


def test_every_file_the_readme_names_exists() -> None:
    text = README.read_text(encoding="utf-8")
    assert "](docs/" in text and "`scripts/" in text  # links and backticked paths were read

    assert missing_paths(README) == []


def test_a_section_the_readme_refers_to_is_a_heading() -> None:
    """'see "Sync use"' once named a heading that reads "Streaming, JSON mode, sync use"; a
    section is now named by a link to a docs page's anchor, which must be one of its
    headings (mkdocs checks the docs pages' own links: tests/test_docs.py)."""
    text = README.read_text(encoding="utf-8")
    quoted = [" ".join(name.split()) for name in re.findall(r'\b[Ss]ee "([^"]+)"', text)]
    anchored = re.findall(r"\]\([^)#\s]*#[^)\s]+\)", text)

    assert anchored  # the references were read
    assert [name for name in quoted if name not in headings(README)] == []
    assert broken_anchors(README) == []


@pytest.mark.parametrize("page", [README, DOCS / "first-agent.md"], ids=lambda p: p.name)
def test_the_first_agent_runs_pasted_into_a_plain_python_with_run_sync(
    page: Path, tmp_path: Path
) -> None:
    """The first snippet, pasted into ``python``, once failed with "'await' outside function":
    the agent is made in a block without ``await``, then either awaited (a notebook) or run by
    ``run_sync`` (a script); the second way runs here in a plain interpreter, offline. The
    README and the docs' first page show the same three blocks."""
    import os
    import subprocess
    import sys

    made, awaited, synced = [b for b in blocks(page) if b.section == "A first agent"
                             and b.lang == "python"]
    assert "await" not in made.text and "await" not in synced.text
    assert "await agent.user_message" in awaited.text  # the notebook's form, run by the test above

    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run([sys.executable, "-c", made.text + "\n" + synced.text], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "5" in done.stdout.splitlines()[-1]  # the model's answer quotes the tool's result
