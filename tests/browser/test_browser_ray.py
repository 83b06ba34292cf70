"""Issue 15 as a person sees it in JupyterLab: ``await agent.batch(inputs, backend="ray")``
in a notebook, on a real local Ray instance (2 CPUs). tqdm's bar in the batch's cell counts
up as the workers' rows arrive; the agent's panel, shown in an earlier cell, says the batch
runs and its Stop ends it: the cell returns the rows (no error), the finished ones kept with
their answers, the others stopped or not run; a second batch in the same kernel then runs on
the same Ray. Ray is started either by the notebook (``ray.init(...)``) or by the batch
itself (``RayBackend(init=...)``)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect

pytestmark = pytest.mark.timeout(420)  # two Ray starts (~10 s each) on a busy 2-core machine

# The brain is a notebook function: cloudpickle sends it to the Ray workers by value. Each
# answer streams in 4-character chunks 0.5 s apart, so a row takes about 3 s.
BATCH_SCRIPT = '''\
batcher = Fragola.scripted(brain=lambda request: reply("done: "
    + request["messages"][-1]["content"]), chunk_delay=0.5, chunk_size=4
    ).agent("batcher", model_settings={"stream": True})
inputs = [f"question {i}" for i in range(32)]
'''
RAY_INIT = ("import time\nimport ray\n"
            "ray.init(num_cpus=2, include_dashboard=False, "
            "object_store_memory=100 * 1024 * 1024)\n"
            "print('RAY UP', ray.is_initialized())")
STATUSES = ("print('STATUSES', [row.status for row in rows])\n"
            "print('ANSWERS', [row.answer for row in rows if row.status == 'done'])\n"
            "print('STOPPED', rows.stopped)\n"
            "for _ in range(100):  # the workers are killed: their CPUs come back\n"
            "    if ray.available_resources().get('CPU') == 2:\n"
            "        break\n"
            "    time.sleep(0.1)\n"
            "print('FREE CPUS', ray.available_resources().get('CPU'))")
AGAIN = ("again = await batcher.batch(inputs[:4], concurrency=2, backend='ray')\n"
         "print('AGAIN', [row.status for row in again], [row.answer for row in again])")
PANEL, INIT, BATCH, RESULT, SECOND = 2, 3, 4, 5, 6  # cell indices (0: title, 1: setup)
STOP_AFTER = 8  # rows done before Stop is clicked: the second wave of rows, at least
COUNT = re.compile(r"\b(\d+)/32\b")


def stderr_of(ui: UI, index: int) -> str:
    return "\n".join(h.cell(ui.page, index).locator(
        "[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts())


def stdout_of(ui: UI, index: int) -> str:
    return "\n".join(h.cell(ui.page, index).locator(
        "[data-mime-type='application/vnd.jupyter.stdout']").all_inner_texts())


def keep_outputs(ui: UI, cells: dict[str, int]) -> None:
    """Every cell's stdout and stderr as the page shows them, next to the screenshots (what
    Ray itself prints into the notebook)."""
    (ui.dir / "cell-outputs.txt").write_text("".join(
        f"== {name} (cell {index}) stdout ==\n{stdout_of(ui, index)}\n"
        f"== {name} (cell {index}) stderr ==\n{stderr_of(ui, index)}\n"
        for name, index in cells.items()))


def counts_while_running(ui: UI, out: Any, stop_at: int) -> list[int]:
    """The bar's count, read every 0.2 s until it reaches ``stop_at``."""
    seen: list[int] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = COUNT.findall(out.inner_text())
        if found:
            count = int(found[-1])
            if not seen or seen[-1] != count:
                seen.append(count)
                if len(seen) == 2:
                    ui.shot("bar-counting", out)
            if count >= stop_at:
                return seen
        time.sleep(0.2)
    raise AssertionError(f"the bar did not reach {stop_at}/32 in 120 s; counts seen: {seen}")


def test_a_ray_batch_counts_up_and_stop_in_the_panel_keeps_its_rows(ui: UI) -> None:
    scenarios.write(ui.lab.root / "ray15.ipynb", scenarios.SETUP + "\n" + BATCH_SCRIPT,
                    "%fragola_panel batcher", RAY_INIT,
                    "rows = await batcher.batch(inputs, concurrency=2, backend='ray')\nrows",
                    STATUSES, AGAIN, title="A batch on Ray, stopped")
    h.open_notebook(ui.page, ui.lab, "ray15.ipynb")
    h.run_all_cells(ui.page)  # not waited for: the batch is watched while it runs
    page = ui.page
    panel = h.cell(page, PANEL).locator(".fragola-panel")
    stop = panel.locator("button.fragola-stop")
    batch_out = h.cell(page, BATCH).locator(".jp-OutputArea")
    # Ray's start is ~10 s; the workers' own start a few more
    expect(h.cell(page, INIT).locator(".jp-OutputArea")).to_contain_text("RAY UP True",
                                                                          timeout=120_000)
    expect(panel.locator(".fragola-strip")).to_contain_text(
        "running on forks — Stop ends it", timeout=120_000)
    expect(stop).to_be_enabled()
    bar = batch_out.locator(".widget-hprogress")
    expect(bar).to_be_visible(timeout=60_000)
    seen = counts_while_running(ui, batch_out, STOP_AFTER)
    # counted up, more than once, as the rows arrived
    assert len([n for n in seen if n > 0]) >= 2 and seen == sorted(seen), seen
    expect(stop).to_be_enabled()
    ui.shot("batch-running", page.locator(".jp-Notebook"))
    stop.click()
    clicked = time.monotonic()
    expect(h.cell(page, BATCH).locator(".jp-InputArea-prompt")).to_have_text(
        re.compile(r"\[\d+\]"), timeout=60_000)
    stopped_in = time.monotonic() - clicked
    assert stopped_in < 20, stopped_in  # the workers stop their inputs at once
    # the batch's cell returns: Run All goes on to the statuses and the second batch
    h.wait_all_executed(page, 120_000)
    result = h.cell(page, RESULT).locator(".jp-OutputArea")
    expect(result).to_contain_text("STATUSES")
    text = result.inner_text()
    statuses = re.search(r"STATUSES (\[.*?\])", text).group(1)  # type: ignore[union-attr]
    done = statuses.count("'done'")
    assert done >= STOP_AFTER and done < 32, text
    assert "'stopped'" in text or "'not run'" in text, text
    assert set(re.findall(r"'([a-z ]+)'", statuses)) <= {"done", "stopped", "not run"}, text
    assert "STOPPED True" in text and "FREE CPUS 2.0" in text, text
    assert "done: question 0" in text, text
    answers = re.search(r"ANSWERS (\[.*?\])", text).group(1)  # type: ignore[union-attr]
    assert answers.count("done: question") == done, text
    # the cell ended normally (no error output) and its bar stopped where the rows did
    assert batch_out.locator("[data-mime-type='application/vnd.jupyter.error']").count() == 0
    assert COUNT.findall(batch_out.inner_text())[-1] == str(done), batch_out.inner_text()
    expect(panel.locator(".fragola-strip")).not_to_contain_text("running on forks")
    expect(stop).to_be_disabled()
    ui.shot("batch-stopped", page.locator(".jp-Notebook"))
    # the same kernel, the same Ray: a second batch runs to its end
    expect(h.cell(page, SECOND).locator(".jp-OutputArea")).to_contain_text(
        "AGAIN ['done', 'done', 'done', 'done'] ['done: question 0', 'done: question 1', "
        "'done: question 2', 'done: question 3']")
    ui.shot("second-batch", h.cell(page, SECOND).locator(".jp-OutputArea"))
    (ui.dir / "counts.txt").write_text(f"bar counts read: {seen}\n"
                                        f"Stop to the cell's end: {stopped_in:.1f} s\n")
    keep_outputs(ui, {"ray.init": INIT, "batch": BATCH, "statuses": RESULT,
                      "second batch": SECOND})
    for index in (INIT, BATCH, RESULT, SECOND):
        assert "Traceback" not in stderr_of(ui, index), (index, stderr_of(ui, index))
    ui.assert_clean()


def test_a_ray_batch_that_starts_ray_itself_then_runs_again(ui: UI) -> None:
    """No ``ray.init`` in the notebook: ``RayBackend(init=...)`` has the batch start Ray;
    a second batch in the kernel uses that Ray as it is."""
    scenarios.write(
        ui.lab.root / "rayinit15.ipynb", scenarios.SETUP + "\n" + BATCH_SCRIPT,
        "from fragola_nb import RayBackend\n"
        "backend = RayBackend(init={'num_cpus': 2, 'include_dashboard': False, "
        "'object_store_memory': 100 * 1024 * 1024})\n"
        "rows = await batcher.batch(inputs[:8], concurrency=2, backend=backend)\nrows",
        "import ray\nprint('RAY UP', ray.is_initialized())\n"
        "print('FIRST', [row.status for row in rows])",
        AGAIN, title="A batch that starts Ray")
    try:
        ui.open_and_run_all("rayinit15.ipynb", timeout=240_000)
    finally:  # a Ray that did not start: its whole error is in the batch's cell
        keep_outputs(ui, {"batch": 2, "statuses": 3, "second batch": 4})
    page = ui.page
    batch_out = h.cell(page, 2).locator(".jp-OutputArea")
    expect(batch_out.locator(".widget-hprogress")).to_be_visible()
    expect(batch_out).to_contain_text("8/8")
    expect(batch_out).to_contain_text("done=8, failed=0")
    expect(h.cell(page, 3).locator(".jp-OutputArea")).to_contain_text(
        "RAY UP True\nFIRST " + str(["done"] * 8))
    expect(h.cell(page, 4).locator(".jp-OutputArea")).to_contain_text(
        "AGAIN ['done', 'done', 'done', 'done']")
    ui.shot("started-by-the-batch", page.locator(".jp-Notebook"))
    for index in (2, 3, 4):
        assert "Traceback" not in stderr_of(ui, index), (index, stderr_of(ui, index))
    ui.assert_clean()
