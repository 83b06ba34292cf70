"""Issue 37 as a person sees it in JupyterLab: an evaluation of an agent that calls tools over
conversations (a case of several turns, a simulated user); a click on a cell shows the row's
trajectory in the detail (the turns, the calls as a compact numbered list with their results,
why it ended, the model calls), hostile tool output as text, and the fork's panel below."""

from __future__ import annotations

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect

pytestmark = pytest.mark.timeout(420)

EVIL = '<img src=x onerror="window.__pwned=1">'
SCRIPT = f'''\
from fragola_nb import SimulatedUser
from fragola_nb.graders import never_called, tool_sequence

@tool
def temperature(city: str) -> str:
    """Current temperature of a city."""
    return "12 degrees in " + city + " " + {EVIL!r}

@tool
def clock(city: str) -> str:
    """What time it is in a city."""
    return "10:00 in " + city

agent = Fragola.scripted().agent("wx", tools=[temperature, clock])
cases = [{{"turns": ["How warm is it in Oslo?", "What time is it in Oslo?"]}},
         {{"user": SimulatedUser('Ask "How warm is it in Rome?" then "How warm is it in Paris?"')}}]
'''
RUN = 2


def test_a_cells_detail_shows_the_trajectory_and_the_panel_opens(ui: UI) -> None:
    scenarios.write(ui.lab.root / "trajectory.ipynb", scenarios.SETUP + "\n" + SCRIPT,
                    "evaluation = await agent.evaluate(cases, graders=[tool_sequence("
                    "['temperature', 'clock'], mode='exact'), never_called('clock')])",
                    title="Issue 37")
    ui.open_and_run_all("trajectory.ipynb", timeout=180_000)
    page = ui.page
    out = h.cell(page, RUN).locator(".jp-OutputArea")
    matrix = out.locator(".fragola-eval")
    expect(matrix.locator(".fragola-eval-count")).to_have_text("2 cases")
    rows = out.locator(".fragola-eval-rows .fragola-eval-row")

    rows.nth(0).locator(".fragola-eval-mark").nth(0).click()
    detail = matrix.locator(".fragola-eval-detail")
    trajectory = detail.locator(".fragola-eval-trajectory")
    expect(trajectory.locator(".fragola-eval-tfacts")).to_have_text(
        "trajectory · ended: all turns · 2 tool calls · 4 model calls")
    expect(trajectory.locator(".fragola-eval-tuser")).to_have_text(
        ["user: How warm is it in Oslo?", "user: What time is it in Oslo?"])
    expect(trajectory.locator(".fragola-eval-call")).to_have_text([
        f'temperature({{"city": "Oslo"}}) → 12 degrees in Oslo {EVIL}',
        'clock({"city": "Oslo"}) → 10:00 in Oslo'])
    expect(detail.locator(".fragola-eval-grades li").nth(1)).to_contain_text(
        "never_called('clock'): 'clock' called (1 call)")
    panel = out.locator(".fragola-panel")
    expect(panel.locator(".fragola-name")).to_have_text("wx-base-case0-r0")
    assert out.locator(".fragola-eval-detail img, .fragola-eval-detail script").count() == 0
    wrap = detail.evaluate("d => [d.scrollWidth, d.clientWidth]")
    assert wrap[0] <= wrap[1] + 1, wrap
    ui.shot("trajectory-turns", out)

    # the simulated user's conversation: its turns, why it ended, its calls apart
    rows.nth(1).locator(".fragola-eval-mark").nth(0).click()
    expect(trajectory.locator(".fragola-eval-tfacts")).to_have_text(
        "trajectory · ended: user done · 2 tool calls · 4 model calls · "
        "3 by the simulated user")
    expect(trajectory.locator(".fragola-eval-tuser")).to_have_text(
        ["user: How warm is it in Rome?", "user: How warm is it in Paris?"])
    expect(trajectory.locator(".fragola-eval-treply").nth(1)).to_contain_text(
        "agent: The tool temperature returned: 12 degrees in Paris")
    expect(panel.locator(".fragola-name")).to_have_text("wx-base-case1-r0")
    ui.shot("trajectory-simulated-user", out)
    assert page.evaluate("() => window.__pwned === undefined")
    ui.lab.shutdown_all_kernels()
    ui.assert_clean()
