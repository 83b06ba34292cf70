"""Issue 27 item 10: a batch on Ray in a real kernel, as the experiments notebook runs it.
Ray's start-up is said apart ("Ray started in N s"), the bar's clock and rate count the batch
only, and Ray's red start-up notice (token authentication is on) stays out of the cell.
A real local Ray started by the kernel, the scripted model behind the openai client."""

from __future__ import annotations

import re
import time

import pytest
from support.kernel_harness import Kernel

pytestmark = pytest.mark.timeout(300)

SETUP = """
from fragola_nb import Fragola, RayBackend
from fragola_nb.models.scripted import reply
grader = Fragola.scripted(brain=lambda request: reply("ok")).agent("grader")
backend = RayBackend(init={"num_cpus": 2, "object_store_memory": 100 * 1024 * 1024})
"""
BATCH = "rows = await grader.batch([f'q{i}' for i in range(5)], backend=backend)\nrows.done"


def bar_text(kernel: Kernel) -> str:
    """The right-hand text of the batch's progress bar (tqdm's widget), as last sent."""
    texts = [w["value"] for w in kernel.widgets.values()
             if w.get("_model_name") == "HTMLModel" and "/5" in str(w.get("value"))]
    assert texts, kernel.widgets
    return str(texts[-1]).replace("\u2007", " ").replace("&lt;", "<")


def test_ray_start_up_is_told_apart_and_its_notice_stays_out_of_the_cell() -> None:
    with Kernel() as kernel:
        kernel.execute(SETUP)
        began = time.monotonic()
        result = kernel.execute(BATCH, timeout=240)
        took = time.monotonic() - began
        assert result.data[-1]["text/plain"] == "5"
        # Ray's notice is not in the cell (it was: a red WARNING line on stderr)
        assert "Token authentication" not in result.stderr + result.stdout, result.stderr
        assert "authentication_token_setup" not in result.stderr
        # the start-up, apart
        started = re.search(r"Ray started in (\d+) s", result.stdout)
        assert started, (result.stdout, result.stderr)
        ray_s = int(started.group(1))
        # where Ray leaves its logs (in the temp dir, kept after it ends) is said, and true
        logs = re.search(r"its logs stay after, in (\S+)\n", result.stdout)
        assert logs, result.stdout
        assert kernel.eval(f"__import__('os').path.isdir({logs.group(1)!r})") is True
        assert kernel.eval("__import__('os').path.basename(__import__('ray')._private.worker"
                           ".global_worker.node.get_session_dir_path())") in logs.group(1)
        assert 1 <= ray_s <= took
        # the bar's clock starts once Ray is up: its elapsed time leaves Ray's start-up out
        text = bar_text(kernel)
        assert "5/5" in text and "done=5, failed=0" in text, text
        minutes, seconds = map(int, re.search(r"\[(\d+):(\d+)<", text).groups())  # type: ignore[union-attr]
        elapsed = 60 * minutes + seconds
        assert elapsed <= took - ray_s + 1, (text, took, ray_s)

        # a second batch joins the running Ray: nothing to tell about start-up
        again = kernel.execute(BATCH, timeout=240)
        assert "Ray started" not in again.stdout and "Token" not in again.stderr
        assert "its logs" not in again.stdout
