"""Guardrails in the notebook layer: the panel's row of a rejected message says who rejected it
and why (plain text, drawn with ``textContent``), and a ``%%fragola`` cell whose message is
rejected fails in one line, the agent usable after it (a real IPython shell, the scripted
model)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import ExecutionResult, InteractiveShell
from support.helpers import make_agent, user

from fragola_nb import Fragola
from fragola_nb.models.scripted import ScriptedModel, reply
from fragola_nb.notebook.panel.message_rows import Rows
from fragola_nb.notebook.panel.view import AgentPanel
from fragola_nb.presets.guardrails import GuardrailRejected, Rejection, guardrail


def no_secrets(text: str) -> Rejection | None:
    # a reason with markup and a direction control: shown as text, the control made visible
    return Rejection("it holds <b>a key</b>\u202e", guard="no_secrets") if "sk-" in text else None


async def test_the_panel_row_of_a_rejected_message_names_the_guard_and_reason(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    panel = AgentPanel(agent)
    guardrail(agent, no_secrets)
    model.push(reply("Hi."))
    await agent.user_message("hello")

    with pytest.raises(GuardrailRejected):
        await agent.user_message("sk-<i>1</i>")

    rows = panel.rows
    assert [row.get("rejected") for row in rows] == [
        None, None, "rejected by no_secrets: it holds <b>a key</b>\\u202e"]
    assert rows[2]["role"] == "user"
    assert rows[2]["html"] == '<div class="fragola-text">sk-&lt;i&gt;1&lt;/i&gt;</div>'


def test_a_rejected_reply_row_keeps_its_text_and_shows_the_rejection() -> None:
    rows = Rows(start=0)
    added, _ = rows.add([
        user("refund?"),
        {"role": "assistant", "content": "Sure, a *refund*!",
         "fragola_nb": {"rejected": {"guard": "no_promises", "reason": "promises a refund"}}},
    ])
    assert added[1] == {"k": 1, "i": 1, "role": "assistant",
                        "html": "<p>Sure, a <em>refund</em>!</p>\n", "calls": [],
                        "rejected": "rejected by no_promises: promises a refund"}
    assert "rejected" not in added[0]


# -- %%fragola --------------------------------------------------------------------------------


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.extension_manager.load_extension("fragola_nb")
    try:
        yield ip
    finally:
        ip.extension_manager.unload_extension("fragola_nb")
        ip.reset(new_session=False)


def run(shell: InteractiveShell, cell: str) -> ExecutionResult:
    return shell.run_cell(cell, store_history=False)


def test_a_rejected_fragola_cell_fails_in_one_line_and_the_agent_goes_on(
        shell: InteractiveShell, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    fragola = Fragola(model="m", api_key="test-key", base_url=model.base_url, max_retries=0)
    agent = shell.user_ns["agent"] = fragola.agent(name="a")
    guardrail(agent, no_secrets, on_reject="remove")
    capsys.readouterr()

    result = run(shell, "%%fragola --out st\nmy key: sk-123")

    assert isinstance(result.error_in_exec, GuardrailRejected) and "st" not in shell.user_ns
    out, err = capsys.readouterr()
    assert out.splitlines()[-2:] == [
        "GuardrailRejected: rejected by no_secrets: it holds <b>a key</b>\\u202e",
        "(%tb shows the full traceback)"]
    assert "Traceback" not in out + err and "sk-123" not in out + err
    assert model.requests == [] and agent.state.messages == []
    model.push(reply("ok"))
    assert run(shell, "%%fragola\nhello").success
    assert agent.state.messages == [user("hello"), {"role": "assistant", "content": "ok"}]


def test_the_html_and_text_views_show_the_rejection_escaped() -> None:
    from fragola_nb.base.render import conversation_html, transcript_text

    messages = [{"role": "user", "content": "sk-1",
                 "fragola_nb": {"rejected": {"guard": "no<secrets>", "reason": "a <b>key</b>"}}}]

    assert ('<div class="fragola-error">rejected by no&lt;secrets&gt;: a &lt;b&gt;key&lt;/b&gt;'
            '</div>') in conversation_html(messages, title="t")
    assert transcript_text(messages) == (
        "#0 [user] sk-1\n#0 [user rejected by no<secrets>] a <b>key</b>")
