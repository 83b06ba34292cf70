"""The docs' "A real model on this machine" snippets (docs/local-models.md), run as pasted in one
real kernel with the local extra installed (the offline run of tests/test_docs.py leaves them
out)."""

from __future__ import annotations

from pathlib import Path

from support.doc_snippets import LOCAL_SECTION, run, section_blocks
from support.kernel_harness import Kernel


def test_the_local_model_snippets_run_in_a_kernel(tmp_path: Path) -> None:
    snippets = [b for b in section_blocks(LOCAL_SECTION) if b.runs_in_a_kernel]
    assert [b.text.splitlines()[0] for b in snippets] == [
        "from fragola_nb import Fragola", "%load_ext fragola_nb", "%%fragola"]

    with Kernel() as kernel:  # the harness drops OPENAI_* from the kernel's environment
        run(kernel, f"import os; os.chdir({str(tmp_path)!r})")
        said = []
        for block in snippets:
            result, status = run(kernel, block.text)
            assert result.error is None and status == "ok", (block.line, result.error,
                                                              result.stderr)
            said.append(result.stdout)

    answer, started, _ = said
    assert answer.strip() and "(scripted model)" not in answer
    assert "SmolLM2-135M-Instruct runs on this machine (llama.cpp at http://127.0.0.1:" in started
