"""The docs site (mkdocs.yml, docs/): ``mkdocs build --strict`` builds it without a single
warning (a broken link, anchor, nav entry or API reference fails), with an API entry for every
name the package exports and the user guide's notebooks rendered; every page's snippets run in
order in a real kernel, offline, as the README's do, and every path a page names exists (the
rules: tests/support/doc_snippets.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.doc_snippets import DOCS, ROOT, blocks, missing_paths, pages, run_offline

import fragola_nb

RUNNABLE = [page for page in pages() if any(b.runs_offline for b in blocks(page))]


def test_the_pages_have_snippets_to_run() -> None:
    runnable = [b for page in RUNNABLE for b in blocks(page) if b.runs_offline]

    assert len(RUNNABLE) >= 10 and len(runnable) >= 20
    assert any(b.text.startswith("%%fragola") for b in runnable)


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(DOCS)))
def test_a_pages_snippets_run_in_order_in_a_kernel_offline(page: Path, tmp_path: Path) -> None:
    assert run_offline(page, tmp_path) >= 1


def test_every_path_a_page_names_exists() -> None:
    missing = {str(page.relative_to(ROOT)): missing_paths(page) for page in pages()}

    assert {page: paths for page, paths in missing.items() if paths} == {}


@pytest.mark.timeout(600)
def test_the_site_builds_strict_without_a_warning(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--site-dir", str(site)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=540, check=False)
    log = done.stdout + done.stderr

    assert done.returncode == 0, log
    assert [line for line in log.splitlines() if "WARNING" in line] == [], log
    # Every public name has its entry in the API pages, under the name users import.
    api = "".join(path.read_text(encoding="utf-8")
                  for path in (site / "reference").rglob("index.html"))
    documented = set(re.findall(r'id="fragola_nb\.(\w+)"', api))
    assert sorted(set(fragola_nb.__all__) - documented) == []
    # The user guide's notebooks are pages of the site.
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = site / "notebooks" / notebook.stem / "index.html"
        assert page.is_file(), notebook.name
