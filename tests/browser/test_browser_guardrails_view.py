"""Issue 14's visible parts as a person sees them in JupyterLab: a guardrail's rejection (the
``%%fragola`` cell failing in one line, the panel's "rejected by GUARD: REASON" line) and an
``Orchestration``'s HTML view, both with hostile text in every place a user or a model can
put it, in a 700 px window and the dark theme; and ``notebooks/system.ipynb`` run top to
bottom."""

from __future__ import annotations

import shutil
from typing import Any

import nbformat
import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import REPO, UI, expect
from .test_browser_long_panel import CONTRAST_JS, set_theme

pytestmark = pytest.mark.timeout(300)

# Any of it parsed as HTML (or followed as a link) would set window.__pwned.
EVIL = ('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1"> '
        '[click me](javascript:window.__pwned=1) file\u202egnp.exe pay\u200bpal ')
LONG = "Z" * 5000
NOT_PWNED = "() => window.__pwned === undefined"


def shown(text: str) -> str:
    """``text`` as the page must show it: the direction override and the zero-width space
    written out."""
    return text.replace("\u202e", "\\u202e").replace("\u200b", "\\u200b")


def inside(target: Any, width: float) -> None:
    """Nothing in ``target`` is wider than its box, and the box fits in ``width`` px."""
    box = target.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, box
    over = target.evaluate("""el => {
      const right = el.getBoundingClientRect().right + 1;
      const wide = [el, ...el.querySelectorAll('*')].filter(e => e.scrollWidth > e.clientWidth + 1
        && getComputedStyle(e).overflowX === 'visible');
      const out = [...el.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > right
        && e.getClientRects().length);
      return [...wide, ...out].map(e => e.className || e.tagName);
    }""")
    assert over == [], over


def no_markup(target: Any, page: Any, bold: int = 0) -> None:
    """No element made of the hostile text (``bold``: the view's own ``<b>``)."""
    assert target.locator("script, img, iframe, a[href^='javascript']").count() == 0
    assert target.locator("b").count() == bold
    assert page.evaluate(NOT_PWNED)


GUARD_SCRIPT = f'''\
from fragola_nb.presets.guardrails import Rejection, guardrail
EVIL = {EVIL!r}
LONG = {LONG!r}
fragola = Fragola.scripted([reply("never asked")])
guarded = fragola.agent(name="guarded")

def hostile(text):
    return Rejection("<b>no</b> " + EVIL + LONG, guard='<img src=x onerror="window.__pwned=1">')

rails = guardrail(guarded, hostile, on_reject="annotate")
'''
SETUP, PANEL, TURN = 1, 2, 3


def test_a_rejected_message_in_the_panel_and_the_cell_hostile_narrow_dark(ui: UI) -> None:
    scenarios.write(ui.lab.root / "guard14.ipynb", scenarios.SETUP + "\n" + GUARD_SCRIPT,
                    "%fragola_panel guarded", f"%%fragola guarded\n{EVIL}{LONG}",
                    title="Guardrails")
    dialogs: list[str] = []
    ui.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    ui.open_and_run_all("guard14.ipynb")
    page = ui.page
    panel = h.cell(page, PANEL).locator(".fragola-panel")
    row = panel.locator(".fragola-msg-user")
    expect(row).to_have_count(1)
    line = row.locator(".fragola-rejected")
    expect(line).to_have_text(
        shown('rejected by <img src=x onerror="window.__pwned=1">: <b>no</b> ' + EVIL + LONG))
    expect(row.locator(".fragola-body")).to_have_text(shown(EVIL + LONG))
    expect(panel.locator(".fragola-status")).to_have_text("idle")
    no_markup(panel, page)
    # a reason of 5,000 characters shows its start, like a long message; the rest on demand
    assert line.bounding_box()["height"] < 320, line.bounding_box()
    more = row.locator(".fragola-more")
    expect(more).to_have_count(2)  # the message's, the line's
    expect(more.nth(1)).to_have_text(f"show all {len(line.text_content() or ''):,} characters")

    # the cell: one line of error (and the %tb hint) naming the guard; nothing drawn as HTML
    out = h.cell(page, TURN).locator(".jp-OutputArea")
    error = out.locator("[data-mime-type='application/vnd.jupyter.stderr']")
    expect(error).to_have_count(1)
    text, hint = error.inner_text().strip().split("\n")
    assert hint == "(%tb shows the full traceback)" and "Traceback" not in text, text[:400]
    assert text.startswith("GuardrailRejected: rejected by <img"), text[:200]
    assert "\u202e" not in text and "\u200b" not in text, text[:400]
    no_markup(out, page)
    ui.shot("rejected-1280", h.cell(page, PANEL))
    # the turn's own panel says why the turn ended, in a bounded box
    notice = out.locator(".fragola-panel .fragola-notice-text")
    expect(notice).to_contain_text("GuardrailRejected: rejected by <img")
    assert notice.bounding_box()["height"] < 320, notice.bounding_box()
    ui.shot("turn-panel", out.locator(".fragola-panel"))

    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        panel.scroll_into_view_if_needed()
        inside(panel, 700)
        inside(out, 700)
        ui.shot("rejected-700px", h.cell(page, PANEL))
        ui.shot("turn-panel-700px", out.locator(".fragola-panel"))
        set_theme(page, "JupyterLab Dark")
        ratios = panel.locator(".fragola-rejected, .fragola-body, .fragola-role, .fragola-more"
                               ).evaluate_all(CONTRAST_JS)
        ratios += out.locator(".fragola-notice-text").evaluate_all(CONTRAST_JS)
        assert len(ratios) >= 6 and [r for r in ratios if r["ratio"] < 4.5] == [], ratios
        inside(panel, 700)
        ui.shot("rejected-700px-dark", h.cell(page, PANEL))
        more.nth(1).click()  # the whole reason, wrapped inside the panel
        expect(more.nth(1)).to_have_text("show less")
        assert line.bounding_box()["height"] > 320
        inside(panel, 700)
        ui.shot("rejected-shown-all-dark", h.cell(page, PANEL))
    finally:
        set_theme(page, "JupyterLab Light")
        page.set_viewport_size({"width": 1280, "height": 1100})
    assert dialogs == [] and page.evaluate(NOT_PWNED)
    ui.assert_clean()


ORCHESTRA_SCRIPT = f'''\
from fragola_nb.presets.orchestration import orchestrate
EVIL = {EVIL!r}
LONG = {LONG!r}
office = Fragola.scripted()
lead = office.agent("<b>lead</b> file\\u202egnp.exe", "Leads.", "You lead.")
helper = office.agent('<img src=x onerror="window.__pwned=1">' + "H" * 300, "Helps.", "Help.")
team = orchestrate(lead, [lead, helper], [{{"from": lead, "to": "*"}}])
office.script(lead, [tool_calls(call("message_agent", {{"id": helper.id,
                                                         "message": EVIL + LONG}})),
                     reply("done")])
office.script(helper, [reply("pay\\u200bpal " + EVIL + LONG)])
'''


def test_the_orchestration_view_with_hostile_names_and_messages_narrow_dark(ui: UI) -> None:
    scenarios.write(ui.lab.root / "team14.ipynb", scenarios.SETUP + "\n" + ORCHESTRA_SCRIPT,
                    "await lead.user_message('go')\nteam", title="Orchestration")
    dialogs: list[str] = []
    ui.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    ui.open_and_run_all("team14.ipynb")
    page = ui.page
    out = h.cell(page, 2).locator(".jp-OutputArea")
    view = out.locator("[data-mime-type='text/html']")
    expect(view).to_have_count(1)
    text = view.inner_text()
    assert "Orchestration(lead='<b>lead</b> file\\u202egnp.exe'" in text, text[:300]
    assert "<b>lead</b> file\\u202egnp.exe (lead) → <img src=x onerror=" in text, text[:600]
    assert "[answered]" in text and "pay\\u200bpal" in text, text
    assert "\u202e" not in text and "\u200b" not in text, text
    no_markup(out, page, bold=1)  # the view's title
    ui.shot("team-1280", out)
    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        out.scroll_into_view_if_needed()
        inside(view, 700)
        ui.shot("team-700px", out)
        set_theme(page, "JupyterLab Dark")
        ratios = view.locator("b, pre").evaluate_all(CONTRAST_JS)
        assert len(ratios) == 2 and [r for r in ratios if r["ratio"] < 4.5] == [], ratios
        ui.shot("team-700px-dark", out)
    finally:
        set_theme(page, "JupyterLab Light")
        page.set_viewport_size({"width": 1280, "height": 1100})
    assert dialogs == [] and page.evaluate(NOT_PWNED)
    ui.assert_clean()


def test_the_system_notebook_top_to_bottom(ui: UI) -> None:
    """``notebooks/system.ipynb``, Run All: every panel drawn, the rejected messages shown
    in the cook's panel, the team's view, no error output, no console error."""
    shutil.copytree(REPO / "notebooks", ui.lab.root / "notebooks", dirs_exist_ok=True)
    nb = nbformat.read(str(REPO / "notebooks" / "system.ipynb"), as_version=4)
    ui.open_and_run_all("notebooks/system.ipynb", timeout=180_000)
    page = ui.page
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    panels = [i for i in code if nb.cells[i].source.startswith(("%%fragola", "%fragola_panel"))]
    assert len(panels) >= 7, panels
    for index in panels:
        panel = h.cell(page, index).locator(".fragola-panel").first
        expect(panel).to_be_visible()
        expect(panel.locator(".fragola-status")).to_be_visible()
    cook = next(i for i in code if nb.cells[i].source.strip() == "%fragola_panel cook")
    rejected = h.cell(page, cook).locator(".fragola-rejected")
    expect(rejected).to_have_text(["rejected by no_secrets: it holds an API key",
                                   "rejected by topic: this assistant only talks about cooking"])
    ui.shot("cook-panel", h.cell(page, cook))
    team = next(i for i in code if nb.cells[i].source.rstrip().endswith("\nteam"))
    expect(h.cell(page, team).locator(".jp-OutputArea")).to_contain_text(
        "lead → researcher: What causes the tides?")
    ui.shot("team", h.cell(page, team))
    for index in panels:
        ui.shot(f"panel-cell{index}", h.cell(page, index))
    saved = h.save_notebook(page, ui.lab, "notebooks/system.ipynb")
    errors = [f"cell {i}: {o['ename']}: {o['evalue']}" for i, c in enumerate(saved["cells"])
              for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, errors
    assert not page.get_by_text("Error displaying widget").count()
    ui.assert_clean()
