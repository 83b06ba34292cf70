"""Issue 12 as a person sees it in JupyterLab: the compare grid with 8 variants and hostile
names and answers (text only, bounded, scrolling, readable in the dark theme, at 700 px),
the panel header's tokens line and a turn panel's "this turn: N tokens", a grid streaming
live, the batch's progress bar, the panel's Stop ending a batch started in a later cell
(rows kept), and the grid after the notebook is saved and reopened without its kernel."""

from __future__ import annotations

import itertools
import re
import shutil
import time
from typing import Any

import nbformat
import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import REPO, UI, expect
from .test_browser_long_panel import CONTRAST_JS, set_theme

pytestmark = pytest.mark.timeout(300)

# Hostile text: markup, a javascript: link in Markdown, a direction override, a zero-width
# space, a 5,000-character word. Any of it parsed as HTML would set window.__pwned.
EVIL = ('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1"> '
        '[click me](javascript:window.__pwned=1) file\u202egnp.exe pay\u200bpal ')
LONG_WORD = "W" * 5000
NAMES = ["plain", "<script>window.__pwned=1</script>", '<img src=x onerror="window.__pwned=1">',
         "file\u202egnp.exe", "pay\u200bpal", "long", "huge" + "H" * 300, "eighth"]

GRID_SCRIPT = f'''\
def brain(request):
    first = request["messages"][0]
    told = first["content"] if first["role"] == "system" else "nothing special"
    if told == "long":
        return reply("\\n".join(f"line {{i}} of a long answer" for i in range(400)))
    return reply("I was told: " + told + ". DNS maps names to addresses.")

fragola = Fragola.scripted(brain=brain, chunk_size=50)
agent = fragola.agent("tutor", model_settings={{"stream": True}})
texts = ["", {EVIL!r}, {LONG_WORD!r}, "be brief", "talk like a pirate", "long", "", "x"]
variants = {{name: ({{"instructions": text}} if text else {{}})
            for name, text in zip({NAMES!r}, texts)}}
'''
GRID, TURN1, TURN2, PANEL = 2, 3, 4, 5

DIALOGS_AND_PWNED = "() => window.__pwned === undefined"


def grid_notebook(ui: UI, path: str) -> None:
    scenarios.write(ui.lab.root / path, scenarios.SETUP + "\n" + GRID_SCRIPT,
                    "comparison = await agent.compare('What is DNS?', variants)",
                    "%%fragola agent\nHello", "%%fragola agent\nAnd again",
                    "%fragola_panel agent", title="Issue 12")


def check_grid(ui: UI, out: Any) -> None:
    cols = out.locator(".fragola-compare-col")
    expect(cols).to_have_count(8)
    shown = [n.replace("\u202e", "\\u202e").replace("\u200b", "\\u200b") for n in NAMES]
    expect(cols.locator(".fragola-compare-name")).to_have_text(shown)
    expect(cols.locator(".fragola-compare-status")).to_have_text(["finished"] * 8)
    evil = cols.nth(1).locator(".fragola-compare-answer")
    expect(evil).to_contain_text("[click me](javascript:window.__pwned=1)")
    expect(evil).to_contain_text("file\\u202egnp.exe pay\\u200bpal")
    assert out.locator("script, img, a, iframe").count() == 0
    assert ui.page.evaluate(DIALOGS_AND_PWNED)


def bounded(out: Any, limit: float) -> None:
    """Nothing in the grid sticks out of the output area, and no column is taller than
    ``limit`` px: a long answer scrolls inside its column."""
    area = out.bounding_box()
    grid = out.locator(".fragola-compare-grid")
    box = grid.bounding_box()
    assert box["x"] >= area["x"] - 1 and box["x"] + box["width"] <= area["x"] + area["width"] + 1
    assert grid.evaluate("g => g.scrollWidth > g.clientWidth")  # 8 columns scroll sideways
    heights = out.locator(".fragola-compare-col").evaluate_all(
        "cs => cs.map(c => c.getBoundingClientRect().height)")
    assert max(heights) <= limit, heights
    for answer in out.locator(".fragola-compare-answer").all():
        width = answer.evaluate("a => [a.scrollWidth, a.clientWidth]")
        assert width[0] <= width[1] + 1, width  # the 5,000-character word wraps


def test_grid_of_eight_hostile_variants_tokens_dark_narrow_and_reopened(
        ui: UI, browser: Any) -> None:
    grid_notebook(ui, "grid12.ipynb")
    dialogs: list[str] = []
    ui.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    ui.open_and_run_all("grid12.ipynb", timeout=200_000)  # 8 streaming columns: a slow CI machine
    page, out = ui.page, h.cell(ui.page, GRID).locator(".jp-OutputArea")
    check_grid(ui, out)
    ui.shot("grid-8-variants", out)
    bounded(out, 700)

    # a long answer is scrollable inside its column, and reachable
    long_answer = out.locator(".fragola-compare-col").nth(5).locator(".fragola-compare-answer")
    assert long_answer.evaluate("a => a.scrollHeight > a.clientHeight")
    expect(long_answer).to_contain_text("line 399 of a long answer")

    # the header's usage line, and each turn panel's own
    turn1 = h.cell(page, TURN1).locator(".fragola-panel .fragola-facts")
    turn2 = h.cell(page, TURN2).locator(".fragola-panel .fragola-facts")
    total = h.cell(page, PANEL).locator(".fragola-panel .fragola-facts")
    number = re.compile(r"this turn: ([\d,]+) tokens")
    expect(turn1).to_contain_text(number)
    expect(turn2).to_contain_text(number)
    expect(total).to_contain_text(re.compile(r"· ([\d,]+) tokens"))
    n1 = int(number.search(turn1.inner_text()).group(1).replace(",", ""))  # type: ignore[union-attr]
    n2 = int(number.search(turn2.inner_text()).group(1).replace(",", ""))  # type: ignore[union-attr]
    nt = int(re.search(r"([\d,]+) tokens", total.inner_text()).group(1)  # type: ignore[union-attr]
             .replace(",", ""))
    assert "this turn" not in total.inner_text()
    assert n1 > 0 and n2 > 0 and nt == n1 + n2, (n1, n2, nt)
    assert "prompt" in (total.get_attribute("title") or "")
    ui.shot("turn-panel-tokens", h.cell(page, TURN2).locator(".jp-OutputArea"))

    # dark theme: every text of the grid readable, the marked differences too
    set_theme(page, "JupyterLab Dark")
    try:
        ui.shot("grid-dark", out)
        parts = out.locator(".fragola-compare-top, .fragola-compare-name, "
                            ".fragola-compare-status, .fragola-compare-facts, "
                            ".fragola-compare-answer > *, .fragola-compare-legend > *")
        ratios = parts.evaluate_all(CONTRAST_JS)
        assert len(ratios) > 20
        low = [r for r in ratios if r["ratio"] < 4.5]
        assert low == [], low
    finally:
        set_theme(page, "JupyterLab Light")

    # 700 px: inside the window, columns scroll sideways, still bounded
    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        out.scroll_into_view_if_needed()
        box = out.locator(".fragola-compare-grid").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 700, box
        bounded(out, 700)
        ui.shot("grid-700px", out)
    finally:
        page.set_viewport_size({"width": 1280, "height": 1100})

    # a click on a hostile name opens its fork's panel, a second click closes it
    cols = out.locator(".fragola-compare-col")
    cols.nth(1).locator(".fragola-compare-head").click()
    panel = out.locator(".fragola-panel")
    expect(panel.locator(".fragola-name")).to_have_text(NAMES[1])
    expect(cols.nth(1).locator(".fragola-compare-head")).to_have_attribute("aria-pressed", "true")
    ui.shot("branch-panel", out)
    cols.nth(1).locator(".fragola-compare-head").click()
    expect(panel).to_have_count(0)
    # a name with a direction override opens its own fork's panel too
    cols.nth(3).locator(".fragola-compare-head").click()
    expect(panel.locator(".fragola-name")).to_have_text("file\\u202egnp.exe")
    cols.nth(3).locator(".fragola-compare-head").click()
    expect(panel).to_have_count(0)
    expect(cols.nth(1).locator(".fragola-compare-head")).to_have_attribute("aria-pressed", "false")
    assert dialogs == [] and page.evaluate(DIALOGS_AND_PWNED)

    # saved with the widget state, the kernel gone, reopened: the grid is still drawn
    saved = h.save_notebook(page, ui.lab, "grid12.ipynb")
    # the static copy beside the widget (nbconvert, GitHub): a table, hostile text escaped
    html = "".join(o["data"].get("text/html", "") for o in saved["cells"][GRID]["outputs"]
                   if "data" in o)
    assert "<table" in html and "&lt;script&gt;" in html and "<script>" not in html
    static = ui.tab.context.new_page()
    static.set_content(html)
    assert static.locator("script, img, a[href^='javascript']").count() == 0
    assert static.evaluate(DIALOGS_AND_PWNED)
    static.screenshot(path=str(ui.dir / "static-html.png"))
    static.close()
    ui.lab.shutdown_all_kernels()
    ui.new_tab(browser)
    ui.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    h.open_notebook(ui.page, ui.lab, "grid12.ipynb", start_kernel=False, wait_kernel=False)
    out = h.cell(ui.page, GRID).locator(".jp-OutputArea")
    expect(out.locator(".fragola-compare-col")).to_have_count(8, timeout=60_000)
    check_grid(ui, out)
    expect(ui.page.locator(".jp-OutputArea-output", has_text="Error displaying widget")
           ).to_have_count(0)
    # no kernel: the grid says it is read-only, its names offer nothing to click
    expect(out.locator(".fragola-compare-detached")).to_have_text(
        "read-only: no kernel; run the cell again to open a branch's panel", timeout=10_000)
    head = out.locator(".fragola-compare-head").nth(0)
    expect(head).to_be_disabled()
    assert head.get_attribute("title") == "no kernel: this grid is read-only"
    ui.shot("grid-reopened", out)
    expect(out.locator(".fragola-panel")).to_have_count(0)
    assert dialogs == []
    h.wait_kernel_idle(ui.page)
    ui.assert_clean()


STREAM_SCRIPT = '''\
fragola = Fragola.scripted(brain=lambda request: reply(
    "".join(f"line {i} of the story\\n" for i in range(40)) + "end of "
    + request["messages"][0]["content"]), chunk_size=6, chunk_delay=0.04)
slow = fragola.agent("slow", model_settings={"stream": True})
'''
AT_END_JS = ("a => a.scrollHeight > a.clientHeight"
             " && a.scrollTop + a.clientHeight >= a.scrollHeight - 4")


def test_the_grid_streams_live_and_the_panel_offers_stop(ui: UI) -> None:
    scenarios.write(ui.lab.root / "stream12.ipynb", scenarios.SETUP + "\n" + STREAM_SCRIPT,
                    "%fragola_panel slow",
                    "streamed = await slow.compare('Go', {'one': {'instructions': 'A'}, "
                    "'two': {'instructions': 'B'}})", title="Streaming grid")
    page = ui.page
    h.open_notebook(page, ui.lab, "stream12.ipynb")
    h.run_all_cells(page)  # not waited for: the grid is watched while it streams
    panel = h.cell(page, 2).locator(".fragola-panel")
    out = h.cell(page, 3).locator(".jp-OutputArea")
    first = out.locator(".fragola-compare-col").nth(0).locator(".fragola-compare-answer")
    expect(out.locator(".fragola-compare-streaming").first).to_be_visible(timeout=30_000)
    expect(out.locator(".fragola-compare-status").first).to_have_text("running")
    # the agent's panel, shown in an earlier cell, says what runs on its forks; Stop is on
    expect(panel.locator(".fragola-strip")).to_contain_text("running on forks — Stop ends it")
    expect(panel.locator("button.fragola-stop")).to_be_enabled()
    # no "0 tokens" while the first model call has not reported its usage
    expect(out.locator(".fragola-compare-col").first).not_to_contain_text(" 0 tokens")
    assert not out.locator(".fragola-compare-facts", has_text=re.compile(r"^0 tokens")).count()
    samples: list[str] = []
    followed: list[bool] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if first.count():
            samples.append(first.inner_text())
            if "fragola-compare-streaming" in (first.get_attribute("class") or ""):
                followed.append(first.evaluate(AT_END_JS))
                if len(followed) == 8:
                    ui.shot("streaming", out)
        if out.locator(".fragola-compare-status", has_text="finished").count() == 2:
            break
        time.sleep(0.1)
    ui.shot("streamed", out)
    growing = [s for s in samples if s and "end of" not in s]
    assert len(set(growing)) >= 3, samples  # seen growing, several times
    for a, b in itertools.pairwise(growing):
        assert b.startswith(a.rsplit("\n", 1)[0]), (a, b)
    # a streaming answer longer than its box shows its newest lines (the box follows)
    assert any(followed), followed
    expect(out.locator(".fragola-compare-status")).to_have_text(["finished"] * 2)
    expect(first).to_have_text(re.compile(r"end of A\s*$"))
    expect(out.locator(".fragola-compare-streaming")).to_have_count(0)
    # "A" left out then "B" added: a gap between them, never read as "AB"
    gone = out.locator(".fragola-compare-col").nth(1).locator("del.fragola-diff-gone").last
    new = out.locator(".fragola-compare-col").nth(1).locator("ins.fragola-diff-new").last
    expect(gone).to_have_text("A")
    expect(new).to_have_text("B")
    assert new.bounding_box()["x"] >= gone.bounding_box()["x"] + gone.bounding_box()["width"] + 2
    expect(panel.locator(".fragola-strip")).not_to_contain_text("running on forks")
    expect(panel.locator("button.fragola-stop")).to_be_disabled()
    h.wait_kernel_idle(page)
    ui.assert_clean()


BATCH_SCRIPT = '''\
batcher = Fragola.scripted(brain=lambda request: reply("done: "
    + request["messages"][-1]["content"]), chunk_delay=0.5, chunk_size=4
    ).agent("batcher", model_settings={"stream": True})
inputs = [f"question {i}" for i in range(12)]
'''


def test_stop_in_an_earlier_panel_ends_a_batch_and_keeps_its_rows(ui: UI) -> None:
    scenarios.write(ui.lab.root / "batch12.ipynb", scenarios.SETUP + "\n" + BATCH_SCRIPT,
                    "%fragola_panel batcher",
                    "rows = await batcher.batch(inputs, concurrency=2)\nrows",
                    "print('STATUSES', [row.status for row in rows])\n"
                    "print('ANSWERS', [row.answer for row in rows if row.status == 'done'])",
                    title="Batch and Stop")
    h.open_notebook(ui.page, ui.lab, "batch12.ipynb")
    h.run_all_cells(ui.page)
    page = ui.page
    panel = h.cell(page, 2).locator(".fragola-panel")
    stop = panel.locator("button.fragola-stop")
    expect(panel.locator(".fragola-strip")).to_contain_text(
        re.compile(r"running on forks — Stop ends it"), timeout=30_000)
    expect(stop).to_be_enabled()
    batch_out = h.cell(page, 3).locator(".jp-OutputArea")
    # tqdm's bar: a widget in the batch's cell, counting
    bar = batch_out.locator(".widget-hprogress, progress, .progress")
    expect(bar.first).to_be_visible(timeout=30_000)
    # let a few rows finish, then Stop
    expect(batch_out).to_contain_text(re.compile(r"\b[2-9]/12\b|\b1[0-2]/12\b"), timeout=60_000)
    ui.shot("batch-running", page.locator(".jp-Notebook"))
    stop.click()
    h.wait_all_executed(page, 60_000)
    statuses = h.cell(page, 4).locator(".jp-OutputArea")
    expect(statuses).to_contain_text("STATUSES")
    text = statuses.inner_text()
    assert "'done'" in text and ("'stopped'" in text or "'not run'" in text), text
    assert "done: question 0" in text, text
    expect(panel.locator(".fragola-strip")).not_to_contain_text("running on forks")
    expect(stop).to_be_disabled()
    ui.shot("batch-stopped", page.locator(".jp-Notebook"))
    errors = h.cell(page, 3).locator("[data-mime-type='application/vnd.jupyter.stderr']")
    assert "Traceback" not in " ".join(errors.all_inner_texts())
    ui.assert_clean()


def test_the_experiments_notebook_top_to_bottom(ui: UI) -> None:
    """``notebooks/experiments.ipynb``, Run All: each compare (in code, with
    ``%%fragola --compare``, replayed) shows its grid with every column finished, the tree
    its panel, the batch its bar and table; no error output, no console error."""
    shutil.copytree(REPO / "notebooks", ui.lab.root / "notebooks", dirs_exist_ok=True)
    nb = nbformat.read(str(REPO / "notebooks" / "experiments.ipynb"), as_version=4)
    ui.open_and_run_all("notebooks/experiments.ipynb", timeout=180_000)
    page = ui.page
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    grids = [i for i in code if ".compare(" in nb.cells[i].source
             or "--compare" in nb.cells[i].source]
    assert len(grids) == 3, grids
    for index in grids:
        out = h.cell(page, index).locator(".jp-OutputArea")
        cols = out.locator(".fragola-compare-col")
        expect(cols.first).to_be_visible()
        n = cols.count()
        assert n >= 3, (index, n)
        expect(cols.locator(".fragola-compare-status")).to_have_text(["finished"] * n)
        assert out.locator(".fragola-panel").count() == 0  # a grid, not a panel
        ui.shot(f"grid-cell{index}", out)
    tree = next(i for i in code if "%fragola_tree" in nb.cells[i].source)
    expect(h.cell(page, tree).locator(".fragola-panel").first).to_be_visible()
    # a tool call that wraps keeps its arrow on its first line
    call = h.cell(page, grids[0]).locator(".fragola-compare-calls li").first
    assert call.evaluate("""li => {
      const t = li.firstChild, r = document.createRange();
      r.setStart(t, 0); r.setEnd(t, 1); const arrow = r.getBoundingClientRect().top;
      r.setStart(t, 2); r.setEnd(t, 3); return Math.abs(arrow - r.getBoundingClientRect().top) < 2;
    }""")
    batch = next(i for i in code if ".batch(questions, concurrency" in nb.cells[i].source)
    batch_out = h.cell(page, batch).locator(".jp-OutputArea")
    expect(batch_out.locator(".widget-hprogress")).to_be_visible()
    expect(batch_out).to_contain_text("done=5")
    ui.shot("batch", batch_out)
    saved = h.save_notebook(page, ui.lab, "notebooks/experiments.ipynb")
    errors = [f"cell {i}: {o['ename']}: {o['evalue']}" for i, c in enumerate(saved["cells"])
              for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, errors
    assert not page.get_by_text("Error displaying widget").count()
    ui.assert_clean()


def test_stop_in_an_earlier_panel_ends_a_compare_and_the_grid_says_so(ui: UI) -> None:
    script = STREAM_SCRIPT.replace("chunk_delay=0.04", "chunk_delay=0.3")
    scenarios.write(ui.lab.root / "stopcmp12.ipynb", scenarios.SETUP + "\n" + script,
                    "%fragola_panel slow",
                    "streamed = await slow.compare('Go', {'one': {'instructions': 'A'}, "
                    "'two': {'instructions': 'B'}})",
                    "print('STATUSES', [row['status'] for row in streamed.table()])",
                    title="Stop a compare")
    page = ui.page
    h.open_notebook(page, ui.lab, "stopcmp12.ipynb")
    h.run_all_cells(page)
    panel = h.cell(page, 2).locator(".fragola-panel")
    out = h.cell(page, 3).locator(".jp-OutputArea")
    expect(out.locator(".fragola-compare-streaming")).to_have_count(2, timeout=30_000)
    expect(panel.locator(".fragola-strip")).to_contain_text("running on forks — Stop ends it")
    panel.locator("button.fragola-stop").click()
    h.wait_all_executed(page, 60_000)
    expect(out.locator(".fragola-compare-status")).to_have_text(["stopped"] * 2)
    expect(out.locator(".fragola-compare-streaming")).to_have_count(0)
    expect(h.cell(page, 4).locator(".jp-OutputArea")).to_contain_text(
        "STATUSES ['stopped', 'stopped']")
    expect(panel.locator("button.fragola-stop")).to_be_disabled()
    ui.shot("compare-stopped", page.locator(".jp-Notebook"))
    ui.assert_clean()


APPROVE_SCRIPT = '''\
def brain(request):
    if request["messages"][0]["content"] == "boom":
        raise RuntimeError("the model broke <b>here</b>")
    if any(m["role"] == "tool" for m in request["messages"]):
        return reply("The sum is " + last_tool_text(request))
    return tool_calls(call("add", {"x": 2, "y": 3}))

calc = Fragola.scripted(brain=brain).agent("calc", tools=[add])
'''


def test_a_waiting_column_approved_in_its_panel_reads_as_the_fork_is(ui: UI) -> None:
    scenarios.write(ui.lab.root / "wait12.ipynb",
                    scenarios.SETUP + "\n" + scenarios.ADD_TOOL + "\n" + APPROVE_SCRIPT,
                    "waits = await calc.compare('Add 2 and 3', {'one': {}, 'two': {}, "
                    "'boom': {'instructions': 'boom'}})",
                    title="Approve in a compare")
    ui.open_and_run_all("wait12.ipynb")
    out = h.cell(ui.page, 2).locator(".jp-OutputArea")
    cols = out.locator(".fragola-compare-col")
    expect(cols.locator(".fragola-compare-status")).to_have_text(
        ["waiting for you"] * 2 + ["failed"])
    expect(cols.nth(2).locator(".fragola-compare-error")).to_be_visible()
    assert out.locator("b").count() == 0
    expect(cols.nth(0).locator(".fragola-compare-note")).to_contain_text("click the name")
    cols.nth(0).locator(".fragola-compare-head").click()
    panel = out.locator(".fragola-panel")
    expect(panel.locator(".fragola-card")).to_have_count(1)
    panel.locator("button.fragola-approve").click()
    expect(panel.locator(".fragola-status")).to_have_text("idle", timeout=30_000)
    expect(cols.nth(0).locator(".fragola-compare-status")).to_have_text("finished")
    expect(cols.nth(0).locator(".fragola-compare-answer")).to_have_text("The sum is 5")
    expect(cols.nth(1).locator(".fragola-compare-status")).to_have_text("waiting for you")
    ui.shot("approved-one", out)
    # the note that asks for a decision is readable, in both themes
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        set_theme(ui.page, theme)
        ratios = out.locator(".fragola-compare-note, .fragola-compare-status, "
                             ".fragola-compare-error, "
                             ".fragola-compare-calls li").evaluate_all(CONTRAST_JS)
        assert len(ratios) >= 4 and [r for r in ratios if r["ratio"] < 4.5] == [], (theme, ratios)
    ui.shot("approved-one-dark", out)
    set_theme(ui.page, "JupyterLab Light")
    ui.assert_clean()

