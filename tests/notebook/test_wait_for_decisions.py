"""``wait_for_decisions``: the guide's cell after a paused turn leaves the decision to the
person under Run All, and says what happened. Driven as JupyterLab's Run All drives a kernel:
every cell sent at once (queued behind the one that runs), the panel's view saying hello when
the front end draws it, and a click on Approve arriving while the waiting cell runs.

Before it, the cell after a paused turn decided in code "if nobody clicked": under Run All it
always did, before anyone could click, while the text said "Click Approve now".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.kernel_harness import Kernel, Result

SETUP = """
%load_ext fragola_nb
from fragola_nb import Fragola, tool
from fragola_nb.notebook import wait_for_decisions

sent = []

@tool(require_approval=True)
def transfer(amount: int, to: str) -> str:
    '''Send money to someone.

    Args:
        amount: how much to send
        to: who receives it
    '''
    sent.append((to, amount))
    return f"sent {amount} to {to}"
"""

TURN = "%%fragola calculator\nPlease transfer 5 to Alice"

# The guide's cell (notebooks/src/quickstart.py), with the wait it is given here.
DECIDE = """
if not await wait_for_decisions(calculator{timeout}):
    for pending in calculator.state.pending:
        if pending.decision is None:
            print("approved in code:", pending.name, pending.arguments)
            calculator.approve(pending.id)
    await calculator.step()
print("sent:", sent)
"""

NEXT = "print('next cell; status', calculator.status, len(sent))"


@pytest.fixture
def kernel() -> Iterator[Kernel]:
    with Kernel() as running:
        running.execute(SETUP)
        running.execute("calculator = Fragola.scripted().agent(name='calculator', "
                        "tools=[transfer])")
        yield running


def lines(result: Result) -> str:
    """What a cell showed: its printed text and its text displays (their last update)."""
    shown = [data["text/plain"] for data in result.data if "text/plain" in data]
    return result.stdout + "\n".join(shown)


def notes(kernel: Kernel, msg_id: str, kind: str = "update_display_data") -> list[str]:
    """The one-line notes (text-only displays) a cell showed, or updated, in order."""
    return [m["content"]["data"]["text/plain"] for m in kernel.iopub_log
            if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == kind
            and set(m["content"]["data"]) == {"text/plain"}]


def run_all(kernel: Kernel, timeout: str = "") -> tuple[str, str, str]:
    """The three cells sent at once, as Run All sends them; their message ids."""
    return (kernel.start(TURN), kernel.start(DECIDE.format(timeout=timeout)),
            kernel.start(NEXT))


def test_run_all_waits_for_the_click_and_the_code_decides_nothing(kernel: Kernel) -> None:
    turn, decide, after = run_all(kernel)
    kernel.collect(turn)
    kernel.act("hello")  # the front end draws the panel
    kernel.drain(0.5)  # the waiting cell runs now; the next one is queued behind it
    assert notes(kernel, decide, "display_data") == [
        "fragola_nb: waiting for your decision on 'calculator''s 1 tool call in its panel "
        "above (at most 120 s; then the cell goes on without it)"]
    assert not [m for m in kernel.iopub_log if m["parent_header"].get("msg_id") == after
                and m["msg_type"] == "stream"]  # Run All stopped at the waiting cell

    # The click, as the card sends it (the kernel is busy: the id is read from the card).
    [card] = kernel.widgets[kernel.panel()]["cards"]
    kernel.act("approve", id=card["raw_id"])
    decided = kernel.collect(decide)
    assert "approved in code" not in decided.stdout
    assert "sent: [('Alice', 5)]" in decided.stdout
    assert ("fragola_nb: 'calculator''s 1 tool call decided in the panel; the "
                           "run went on: finished") in notes(kernel, decide)
    assert "next cell; status idle 1" in kernel.collect(after).stdout


def test_headless_it_decides_in_code_at_once_and_says_why(kernel: Kernel) -> None:
    turn, decide, after = run_all(kernel)  # nothing draws the panel: no hello
    kernel.collect(turn)
    decided = lines(kernel.collect(decide))
    assert ("fragola_nb: not waiting for a click on 'calculator''s 1 tool call: no front end "
            "has drawn its panel (the notebook runs headless, as nbclient and nbconvert run "
            "it)") in decided
    assert "approved in code: transfer {'amount': 5, 'to': 'Alice'}" in decided
    assert "next cell; status idle 1" in kernel.collect(after).stdout


def test_a_drawn_panel_nobody_decides_goes_on_after_the_timeout(kernel: Kernel) -> None:
    turn, decide, after = run_all(kernel, timeout=", timeout=0.5")
    kernel.collect(turn)
    kernel.act("hello")
    kernel.collect(decide)
    assert ("fragola_nb: nobody decided 'calculator''s 1 tool call in 0.5 s: the cell goes on "
            "without a decision") in notes(kernel, decide)
    assert "next cell; status idle 1" in kernel.collect(after).stdout


def test_decided_before_the_cell_ran_it_only_checks(kernel: Kernel) -> None:
    kernel.execute(TURN)
    kernel.act("hello")
    kernel.act("approve", id=kernel.eval("calculator.pending[0].id"))
    kernel.wait_for("calculator.status == 'idle'")
    decided = lines(kernel.execute(DECIDE.format(timeout="")))
    assert decided == "sent: [('Alice', 5)]\n"  # nothing waited, nothing decided in code


def test_a_bad_timeout_is_one_line_and_decides_nothing(kernel: Kernel) -> None:
    kernel.execute(TURN)
    failed = kernel.execute("await wait_for_decisions(calculator, timeout=-1)",
                            allow_error=True)
    assert failed.error is not None and failed.error["ename"] == "BadUsage"
    assert failed.error["evalue"] == "timeout must be a number of seconds >= 0, not -1"
    assert kernel.eval("calculator.status") == "waiting"
    bad_env = kernel.execute("import os; os.environ['FRAGOLA_DECISION_WAIT'] = 'soon'\n"
                             "await wait_for_decisions(calculator)", allow_error=True)
    assert bad_env.error is not None
    assert bad_env.error["evalue"] == ("FRAGOLA_DECISION_WAIT='soon': write a number of "
                                       "seconds >= 0")
