"""The README's snippets run as pasted: every ``python`` block, and every notebook block (a
``%load_ext``/``%%fragola`` cell), in order, in one real kernel, offline (no OPENAI_API_KEY:
the scripted model answers). A block that raises fails the test with its text. The shell
block at the top is what CI runs, and every path the README names exists."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kernel_harness import Kernel, Result

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


HEADING = re.compile(r"^#+ (.*)$", re.MULTILINE)
LOCAL_SECTION = "A real model on this machine"
"""Its snippets need the real local model (the "local" extra): tests/local runs them, in
scripts/test.sh's last stage; the offline run here leaves them out."""


@dataclass
class Block:
    lang: str
    text: str
    line: int
    section: str

    @property
    def runs_in_a_kernel(self) -> bool:
        return self.lang == "python" or self.text.startswith("%")

    @property
    def runs_offline(self) -> bool:
        return self.runs_in_a_kernel and self.section != LOCAL_SECTION


def blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(text))
    headings = [(m.start(), m.group(1).strip()) for m in HEADING.finditer(text)
                if not any(f.start() < m.start() < f.end() for f in fences)]  # not a # comment
    found = []
    for match in fences:
        section = next((title for at, title in reversed(headings) if at < match.start()), "")
        found.append(Block(match.group(1), match.group(2),
                           text.count("\n", 0, match.start()) + 1, section))
    return found


def test_the_readme_has_snippets_to_run() -> None:
    runnable = [b for b in blocks() if b.runs_offline]

    assert len(runnable) >= 4
    assert any(b.text.startswith("%%fragola") for b in runnable)


def run(kernel: Kernel, code: str) -> tuple[Result, str]:
    """What the cell produced, and the status of its execute reply: a magic's UsageError is
    printed, not sent as an error message, but the reply says "error" all the same."""
    msg_id = kernel.start(code)
    result = kernel.collect(msg_id, timeout=120, allow_error=True)
    while True:
        reply = kernel.kc.get_shell_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            return result, str(reply["content"]["status"])


def test_its_snippets_run_in_order_in_a_kernel_offline(tmp_path: Path) -> None:
    with Kernel() as kernel:  # the harness drops OPENAI_* from the kernel's environment
        run(kernel, f"import os; os.chdir({str(tmp_path)!r})")  # files a snippet writes
        for block in blocks():
            if not block.runs_offline:
                continue
            result, status = run(kernel, block.text)
            if result.error is not None or status != "ok":
                error = result.error or {"traceback": []}
                traceback = ANSI.sub("", "\n".join(error["traceback"]))
                raise AssertionError(
                    f"README.md line {block.line}: this block failed ({status})\n\n"
                    f"{block.text}\n{traceback}\n{result.stderr}"
                )


def test_the_first_commands_are_the_quickstart_and_what_ci_runs() -> None:
    first = blocks()[0]
    commands = [line.split("#")[0].strip() for line in first.text.splitlines()]

    assert first.lang == "bash"
    assert commands == ["bash scripts/quickstart.sh", "bash scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "exec bash scripts/test.sh\n" in ci


def test_every_file_the_readme_names_exists() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)\)", text)
    paths = re.findall(r"`([\w.-]+(?:/[\w.*-]+)+)`", text)  # `bench/README.md`, not `/chat/...`

    named = [p for p in [*links, *paths] if not re.match(r"\w+://", p)]
    assert named
    missing = [p for p in named if not any(ROOT.glob(p))]
    assert missing == []


def test_a_section_the_readme_refers_to_is_one_of_its_headings() -> None:
    """'see "Sync use"' once named a heading that reads "Streaming, JSON mode, sync use"."""
    text = README.read_text(encoding="utf-8")
    headings = {title.strip() for title in HEADING.findall(text)}
    named = [" ".join(name.split()) for name in re.findall(r'\b[Ss]ee "([^"]+)"', text)]

    assert named  # the references were read
    assert [name for name in named if name not in headings] == []


def test_the_first_agent_runs_pasted_into_a_plain_python_with_run_sync(tmp_path: Path) -> None:
    """The first snippet, pasted into ``python``, once failed with "'await' outside function":
    the agent is made in a block without ``await``, then either awaited (a notebook) or run by
    ``run_sync`` (a script); the second way runs here in a plain interpreter, offline."""
    import os
    import subprocess
    import sys

    made, awaited, synced = [b for b in blocks() if b.section == "A first agent"
                             and b.lang == "python"]
    assert "await" not in made.text and "await" not in synced.text
    assert "await agent.user_message" in awaited.text  # the notebook's form, run by the test above

    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run([sys.executable, "-c", made.text + "\n" + synced.text], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "5" in done.stdout.splitlines()[-1]  # the model's answer quotes the tool's result
