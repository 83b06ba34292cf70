"""Issue 32, class 1: a credential a server quotes back reaches no file and no view.

A server on loopback (``quoting_api``) answers every request by quoting the credentials it
was sent: the agent's key, a variant's ``extra_headers`` credential and a judge's own key, of
no well-known shape. Every writer and every view of an evaluation, a comparison, a batch and
an agent is then read for each of them: they all pass the one place that knows the
credentials in use (``fragola_nb.base.inuse``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.quoting_api import (
    AGENT_KEY,
    JUDGE_KEY,
    KEYS,
    VARIANT_KEY,
    VARIANTS,
    QuotingAPI,
    fragola_on,
)

from fragola_nb import Fragola, export_html, save_session
from fragola_nb.experiments.evaluate.evaluation import Evaluation
from fragola_nb.graders import contains, judge
from fragola_nb.sessions.export import export_markdown, export_tree_html, export_tree_markdown


def proxied_agent(api: QuotingAPI, name: str = "quoted") -> Any:
    """An agent on the agent's key that sends the variant's key in a header of its own."""
    return fragola_on(api, AGENT_KEY).agent(name, model_settings=VARIANTS["proxied"][
        "model_settings"])


def leaks(where: str, text: Any) -> list[str]:
    """``where`` and each key found in ``text`` (anything: it is read as its JSON or repr)."""
    if not isinstance(text, str):
        text = json.dumps(text, default=repr, ensure_ascii=False)
    return [f"{where}: {key}" for key in KEYS if key in text]


def views(obj: Any, name: str) -> list[str]:
    """The leaks of what a notebook shows of ``obj``: repr, HTML, every MIME type."""
    found = leaks(f"repr({name})", repr(obj)) + leaks(f"str({name})", str(obj))
    html = getattr(obj, "_repr_html_", None)
    if html is not None:
        found += leaks(f"{name}._repr_html_", html())
    bundle = getattr(obj, "_repr_mimebundle_", None)
    if bundle is not None:
        found += leaks(f"{name}._repr_mimebundle_", bundle())
    return found


async def test_the_answer_quotes_every_key_as_sent(api: QuotingAPI) -> None:
    """The premise: without redaction the keys are in the answers."""
    agent = proxied_agent(api)
    state = await agent.user_message("hello")
    assert AGENT_KEY in str(state.messages[-1]["content"])
    assert VARIANT_KEY in str(state.messages[-1]["content"])


async def test_an_evaluation_hides_every_key_in_every_writer_and_view(
        api: QuotingAPI, tmp_path: Path) -> None:
    agent = fragola_on(api, AGENT_KEY).agent("evaluated")
    graders = [contains("thanks"), judge("polite?", fragola=fragola_on(api, JUDGE_KEY))]
    resume = tmp_path / "resume.jsonl"
    evaluation = await agent.evaluate(["hi", "hello"], VARIANTS, graders=graders,
                                      resume=resume, progress=False)
    judged = [grade for row in evaluation for grade in row.grades if grade.name == "judge"]
    assert len(judged) == 4 and all(grade.passed for grade in judged)  # the judge answered
    saved = evaluation.save(tmp_path / "saved.json")
    found = leaks("resume file", resume.read_text()) + leaks("save", saved.read_text())
    found += leaks("table()", evaluation.table()) + leaks("summary()", evaluation.summary())
    found += leaks("to_pandas()", evaluation.to_pandas().to_json())
    found += views(evaluation, "evaluation")
    found += leaks("loaded table()", Evaluation.load(saved).table())
    assert found == []


async def test_a_comparison_hides_every_key_in_its_table_views_and_page(
        api: QuotingAPI, tmp_path: Path) -> None:
    agent = fragola_on(api, AGENT_KEY).agent("compared")
    graders = [judge("polite?", fragola=fragola_on(api, JUDGE_KEY))]
    comparison = await agent.compare("hi", VARIANTS, graders=graders)
    answers = " ".join(str(run.fork.state.messages[-1]["content"]) for run in
                       comparison.runs.values())
    assert VARIANT_KEY in answers and AGENT_KEY in answers  # what the server said, kept
    found = leaks("table()", comparison.table()) + views(comparison, "comparison")
    found += leaks("to_pandas()", comparison.to_pandas().to_json())
    found += leaks("export_html", export_html(comparison, tmp_path / "c.html"))
    found += leaks("export_html file", (tmp_path / "c.html").read_text())
    assert found == []


async def test_a_batch_hides_every_key_in_its_resume_file_views_and_page(
        api: QuotingAPI, tmp_path: Path) -> None:
    agent = proxied_agent(api, "batched")
    graders = [judge("polite?", fragola=fragola_on(api, JUDGE_KEY))]
    resume = tmp_path / "batch.jsonl"
    result = await agent.batch(["hi", "hello"], resume=resume, graders=graders,
                               progress=False)
    assert result.done == 2
    found = leaks("batch resume file", resume.read_text()) + views(result, "batch")
    found += leaks("summary()", result.summary())
    found += leaks("to_pandas()", result.to_pandas().drop(columns="fork").to_json())
    found += leaks("export_html", export_html(result))
    again = await agent.batch(["hi", "hello"], resume=resume, progress=False)
    found += leaks("resumed", [row.answer for row in again]) + views(again, "resumed")
    assert found == []


async def test_an_agents_session_file_and_exports_hide_every_key(
        api: QuotingAPI, tmp_path: Path) -> None:
    agent = proxied_agent(api, "talked")
    await agent.user_message("hi")
    agent.fork("branch")
    assert VARIANT_KEY in str(agent.state.messages[-1]["content"])
    session = save_session(tmp_path / "s.json", agent)
    found = leaks("session file", session.read_text())
    found += leaks("export_markdown", export_markdown(agent, tmp_path / "a.md"))
    found += leaks("export_markdown file", (tmp_path / "a.md").read_text())
    found += leaks("export_tree_markdown", export_tree_markdown(agent))
    found += leaks("export_tree_html", export_tree_html(agent))
    found += leaks("export_html", export_html(agent))
    found += views(agent, "agent") + views(agent.state, "state")
    assert found == []


async def test_text_cut_short_for_a_view_leaves_no_half_key(api: QuotingAPI) -> None:
    """A view cuts a long answer (a batch's table at 160 characters): redacted first, so the
    cut never falls inside a key, leaving a prefix that no longer looks like it."""
    agent = fragola_on(api, AGENT_KEY).agent("cut")
    cut = 160 - len("You sent me ") - 8  # the key's first 7 characters before the cut
    result = await agent.batch(["#" * cut], progress=False)
    assert result[0].answer is not None and AGENT_KEY in result[0].answer
    html = result._repr_html_()
    assert AGENT_KEY[:7] not in html and "You sent me [redact…" in html


async def test_a_resume_file_of_inputs_holding_a_key_resumes_the_rest_and_runs_those_again(
        tmp_path: Path) -> None:
    """The files hold an input with its key redacted, so which key it held cannot be told:
    that row runs again (never answered for another key), the others resume, no error."""
    agent = Fragola.scripted().agent("resumed")
    inputs = ["is sk-proj-abcdefghijkl123 a key?", "plain"]
    await agent.batch(inputs, resume=tmp_path / "b.jsonl", progress=False)
    again = await agent.batch(inputs, resume=tmp_path / "b.jsonl", progress=False)
    assert [row.resumed for row in again] == [False, True]
    assert "sk-proj" not in (tmp_path / "b.jsonl").read_text()
    await agent.evaluate(inputs, resume=tmp_path / "e.jsonl", progress=False)
    evaluation = await agent.evaluate(inputs, resume=tmp_path / "e.jsonl", progress=False)
    assert [row.resumed for row in evaluation] == [False, True]
    assert "sk-proj" not in (tmp_path / "e.jsonl").read_text()
