"""docs/architecture.md draws the house as it is (issue 35): its "Where to look" table names
every folder of the package (a path in the table that starts with the folder counts), and
every path the table names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fragola_nb"


def where_to_look() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = re.search(r"Where to look:\n\n(\|.*?)\n\n", text, re.S)
    assert table is not None, "no 'Where to look' table"
    return table.group(1)


def test_the_table_names_every_folder_of_the_package() -> None:
    table = where_to_look()
    folders = sorted(p.parent.relative_to(ROOT).as_posix() + "/"
                     for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    assert len(folders) > 15
    assert [f for f in folders if f not in table] == []


def test_every_path_the_table_names_exists() -> None:
    paths = re.findall(r"`((?:fragola_nb|tests)/[\w/.<>-]*)`", where_to_look())
    assert len(paths) > 20
    assert [p for p in paths if "<" not in p and not (ROOT / p).exists()] == []
