"""The code blocks and the paths of the README and of the docs site's pages (docs/**/*.md), read
one way for every test that runs or checks them: tests/test_readme.py and tests/test_docs.py
(each page's snippets in a real kernel, the paths it names), tests/local (the local model's
snippets) and tests/package/test_wheel_install.py (snippets run in a plain install).

The rules, the same for every page:

- A block runs in a kernel when it is ``python`` or its text starts with ``%`` (a notebook
  cell: ``%load_ext``, ``%%fragola``). Any other block (``bash``, ``text`` that is not a magic,
  ``py``) is shown, not run: ``py`` is the way to show Python that needs what the tests do not
  have (an OTLP collector). The blocks of the section ``LOCAL_SECTION`` need the real local
  model: tests/local runs them, the offline runs leave them out.
- A page's blocks run in order in one kernel, offline (no ``OPENAI_*``: the scripted model
  answers), in a fresh working directory: a block may use what an earlier block of the same
  page made, never what another page made.
- Every path a page names exists: a link (relative to the page; ``notebooks/NAME.ipynb`` is
  the user guide's notebook, which scripts/mkdocs_hooks.py adds to the site) and a
  ``dir/file`` in backticks (relative to the repository).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from support.kernel_harness import Kernel, Result

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#+ (.*)$", re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"`([\w.-]+(?:/[\w.*-]+)+)`")  # `bench/README.md`, not `/chat/...`
ANSI = re.compile(r"\x1b\[[0-9;]*m")

LOCAL_SECTION = "A real model on this machine"
"""Its snippets need the real local model (the "local" extra): tests/local runs them, in
scripts/test.sh's last stage; the offline runs leave them out."""


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int
    section: str
    path: Path

    @property
    def runs_in_a_kernel(self) -> bool:
        return self.lang == "python" or self.text.startswith("%")

    @property
    def runs_offline(self) -> bool:
        return self.runs_in_a_kernel and self.section != LOCAL_SECTION

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)} line {self.line}"


def pages() -> list[Path]:
    """The docs site's Markdown pages."""
    return sorted(DOCS.rglob("*.md"))


def _headings(text: str) -> list[tuple[int, str]]:
    """Where each heading starts, and its text (not a ``# comment`` in a code block)."""
    fences = list(FENCE.finditer(text))
    return [(m.start(), m.group(1).strip()) for m in HEADING.finditer(text)
            if not any(f.start() < m.start() < f.end() for f in fences)]


def headings(path: Path) -> list[str]:
    return [title for _, title in _headings(path.read_text(encoding="utf-8"))]


def blocks(path: Path = README) -> list[Block]:
    """The fenced code blocks of a Markdown file, in order, each with the heading it is under."""
    text = path.read_text(encoding="utf-8")
    found = _headings(text)
    result = []
    for match in FENCE.finditer(text):
        section = next((title for at, title in reversed(found) if at < match.start()), "")
        result.append(Block(match.group(1), match.group(2),
                            text.count("\n", 0, match.start()) + 1, section, path))
    return result


def section_blocks(title: str) -> list[Block]:
    """The blocks under the heading ``title``, wherever it is (the README or a docs page)."""
    return [b for path in [README, *pages()] for b in blocks(path) if b.section == title]


def slug(heading: str) -> str:
    """The anchor mkdocs (Python-Markdown's toc) gives a heading: ``Traces (OpenTelemetry)``
    is ``#traces-opentelemetry``."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _target(page: Path, link: str) -> Path:
    target = (page.parent / link).resolve()
    if not target.exists() and target.is_relative_to(DOCS / "notebooks"):
        return ROOT / "notebooks" / target.relative_to(DOCS / "notebooks")  # the hook's
    return target


def missing_paths(page: Path) -> list[str]:
    """The paths ``page`` names that do not exist: its local links (relative to the page,
    without their #anchor) and its backticked ``dir/file`` paths (relative to the repository)."""
    text = page.read_text(encoding="utf-8")
    links = [link.split("#")[0] for link in LINK.findall(text)]
    links = [link for link in links if link and not re.match(r"\w+://", link)]
    paths = PATH.findall(text)
    return ([link for link in links if not _target(page, link).exists()]
            + [path for path in paths if not any(ROOT.glob(path))])


def broken_anchors(page: Path) -> list[str]:
    """Links ``file.md#anchor`` of ``page`` whose file has no heading with that anchor."""
    broken = []
    for link in LINK.findall(page.read_text(encoding="utf-8")):
        if "#" not in link or re.match(r"\w+://", link):
            continue
        name, anchor = link.split("#", 1)
        target = _target(page, name) if name else page
        if target.suffix == ".md" and anchor not in {slug(h) for h in headings(target)}:
            broken.append(link)
    return broken


def run(kernel: Kernel, code: str) -> tuple[Result, str]:
    """What the cell produced, and the status of its execute reply: a magic's UsageError is
    printed, not sent as an error message, but the reply says "error" all the same."""
    msg_id = kernel.start(code)
    result = kernel.collect(msg_id, timeout=120, allow_error=True)
    while True:
        reply = kernel.kc.get_shell_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            return result, str(reply["content"]["status"])


def run_offline(path: Path, workdir: Path) -> int:
    """Run the page's offline blocks in order in one new kernel, in ``workdir`` (the files a
    snippet writes); a block that fails raises AssertionError with its place and text.
    Returns how many ran."""
    ran = 0
    with Kernel() as kernel:  # the harness drops OPENAI_* from the kernel's environment
        run(kernel, f"import os; os.chdir({str(workdir)!r})")
        for block in blocks(path):
            if not block.runs_offline:
                continue
            result, status = run(kernel, block.text)
            if result.error is not None or status != "ok":
                error = result.error or {"traceback": []}
                traceback = ANSI.sub("", "\n".join(error["traceback"]))
                raise AssertionError(
                    f"{block.where}: this block failed ({status})\n\n"
                    f"{block.text}\n{traceback}\n{result.stderr}"
                )
            ran += 1
    return ran
