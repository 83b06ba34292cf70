"""``agent.evaluate(..., backend="ray")`` against a real local Ray instance (2 CPUs) and the
scripted model: conversations of several turns, a simulated user and approvals decided by
``decide=`` give the same rows on Ray as locally (issue 37). Ray is a required component:
this fails, never skips, without it."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import ray
from support.helpers import assert_valid_history, user

from fragola_nb import Agent, Budget, Decision, Fragola, RayBackend, SimulatedUser, tool
from fragola_nb.graders import max_model_calls, tool_args, tool_sequence
from fragola_nb.models.scripted import Item, call, reply, tool_calls
from fragola_nb.models.scripted.simulating import simulated_request

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("ray_instance")]


@tool
def double(x: int) -> int:
    """Double a whole number."""
    return 2 * x


@tool(require_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (a person approves it)."""
    return f"deleted {path}"


def brain(request: dict[str, Any]) -> Item:
    """Answers from the request alone, so every worker's scripted model answers alike."""
    messages = request["messages"]
    playing = simulated_request(messages)
    if playing is not None:
        return reply(playing)
    text = str([m for m in messages if m["role"] == "user"][-1]["content"])
    last, system = messages[-1], messages[0]["content"]
    if last["role"] == "tool":
        return reply(f"{text} -> {last['content']} ({system})")
    words = text.split()
    if words[0] == "double":
        return tool_calls(call("double", {"x": int(words[1])}, id=f"call-{words[1]}"))
    if words[0] == "delete":
        return tool_calls(call("delete_file", {"path": words[1]}, id=f"call-{words[1]}"))
    return reply(f"echo: {text} ({system})")


def edit(call: Any) -> Decision:
    return Decision("approve", params={"path": "kept.txt"})


def make_agent() -> Agent:
    fragola = Fragola.scripted(brain=brain)
    return fragola.agent(name="calc", instructions="Be brief.", tools=[double, delete_file],
                         messages=[user("2 + 2?"), {"role": "assistant", "content": "4"}])


def row_key(row: Any) -> tuple[Any, ...]:
    return (row.case, row.variant, row.repeat, row.status, row.answer, row.error, row.answers,
            row.ended, row.tool_calls, row.model_calls, row.turns, row.tokens,
            [(g.name, g.passed, g.reason) for g in row.grades],
            None if row.user_usage is None else row.user_usage.requests)


async def test_conversations_on_ray_give_the_rows_of_the_local_run() -> None:
    agent = make_agent()
    cases = [{"turns": ["double 2", "hello there", "double 5"]},
             {"user": SimulatedUser('Say "double 7" then "delete notes.txt"')},
             {"turns": ["delete a.txt", "double 1"]}]
    variants = {"brief": {"instructions": "Be brief."}, "loud": {"instructions": "LOUD"}}
    graders = [tool_sequence(["double", "double"]), tool_args("delete_file", path="kept.txt"),
               max_model_calls(5)]
    local = await agent.evaluate(cases, variants, graders, repeat=2, progress=False,
                                 decide=edit)
    remote = await agent.evaluate(cases, variants, graders, repeat=2, progress=False,
                                  decide=edit, backend="ray")
    assert [row_key(row) for row in remote] == [row_key(row) for row in local]
    first = remote[0]
    assert first.ended == "all turns" and first.answers == (
        "double 2 -> 4 (Be brief.)", "echo: hello there (Be brief.)", "double 5 -> 10 (Be brief.)")
    talk = remote.cell(1, "loud")[0]
    assert talk.ended == "user done" and talk.turns == ("double 7", "delete notes.txt")
    assert talk.tool_calls[1] == {"name": "delete_file", "arguments": {"path": "notes.txt"},
                                  "result": talk.tool_calls[1]["result"]}
    assert talk.tool_calls[1]["result"].endswith("deleted kept.txt")  # decided on the worker
    assert talk.user_usage is not None and talk.user_usage.requests == 3
    for mine, theirs in zip(remote, local, strict=True):
        assert mine.fork is not None and theirs.fork is not None
        assert mine.fork.state.messages == theirs.fork.state.messages
        assert_valid_history(mine.fork.state.messages)
    assert [(line["pass_rate"], line["graders"]) for line in remote.summary()] == [
        (line["pass_rate"], line["graders"]) for line in local.summary()]


async def test_a_budget_stops_an_evaluation_on_ray_from_starting_more_rows() -> None:
    """The evaluation's budget is in force around the batches it runs on Ray: once spent,
    no more rows are sent to the workers (they end "not run: budget"), as locally."""
    agent = make_agent()
    cases = [f"double {n}" for n in range(30)]
    backend = RayBackend(chunk_size=1, workers=1)
    evaluation = await agent.evaluate(cases, progress=False, budget=Budget(tokens=1),
                                      concurrency=1, backend=backend)
    ran = [row for row in evaluation if row.status in ("done", "failed")]
    not_run = [row for row in evaluation if row.status == "not run"]
    assert ran and not_run and len(ran) + len(not_run) == 30
    assert len(ran) <= 3  # the rows in flight when the first one spent the budget
    assert all(row.error == "budget" or "budget" in str(row.error) for row in not_run)


async def test_a_simulated_users_calls_count_against_budgets_on_ray_as_locally() -> None:
    """The simulated user's calls on a worker are counted by the budgets in force (the
    evaluation's, the Fragola's) when its row comes back, as they are locally: a Fragola's
    meter holds the same tokens after the run on Ray as after the same run here."""
    cases = [{"user": SimulatedUser('Say "double 3" then "hello there"')},
             {"user": SimulatedUser('Say "double 4"')}]
    spent = {}
    for backend in ("local", "ray"):
        fragola = Fragola.scripted(brain=brain, budget=Budget(tokens=10**9))
        agent = fragola.agent(name="calc", instructions="Be brief.", tools=[double])
        evaluation = await agent.evaluate(cases, progress=False, backend=backend)
        assert [row.status for row in evaluation] == ["done", "done"]
        users = sum(row.user_usage.total_tokens for row in evaluation
                    if row.user_usage is not None)
        assert users > 0
        assert fragola.meter is not None
        assert fragola.meter.tokens == evaluation.usage.total_tokens + users
        spent[backend] = fragola.meter.tokens
    assert spent["ray"] == spent["local"]


async def test_an_evaluations_budget_on_ray_is_spent_by_a_simulated_users_calls() -> None:
    """A budget that the graded calls of every row together would not reach, but the
    simulated users' calls do: on Ray too the rows after it are not sent."""
    cases = [{"user": SimulatedUser(f'Say "double {n}" then "hello there"')}
             for n in range(10, 22)]
    agent = make_agent()
    first = await agent.evaluate(cases[:1], progress=False)
    row = first[0]
    assert row.usage is not None and row.user_usage is not None
    # the answers of every case together do not spend it; with the users' calls, half do
    budget = Budget(tokens=len(cases) * row.usage.total_tokens + 1)
    assert row.user_usage.total_tokens >= row.usage.total_tokens
    backend = RayBackend(chunk_size=1, workers=1)
    evaluation = await agent.evaluate(cases, progress=False, budget=budget, concurrency=1,
                                      backend=backend)
    not_run = [row for row in evaluation if row.status == "not run"]
    assert len(not_run) >= 3 and all("budget" in str(row.error) for row in not_run)
    assert evaluation.why_stopped is not None and "budget" in evaluation.why_stopped


async def test_labels_given_after_a_run_on_ray_are_kept_by_its_resume_file(tmp_path: Any
                                                                            ) -> None:
    """Rows that ran on Ray, labelled once the run ended: the resume file keeps the labels,
    so the run resumed (here, or on Ray) gives the labelled rows back without sending."""
    from fragola_nb.experiments.evaluate.labels import Label

    agent = make_agent()
    path = tmp_path / "ray.jsonl"
    cases = ["double 2", "double 3", {"turns": ["double 4", "hello"]}]
    run = await agent.evaluate(cases, progress=False, resume=path, backend="ray")
    assert [row.status for row in run] == ["done"] * 3
    run.label(0, False, note="not what I asked")
    run.label(2, True)
    again = await agent.evaluate(cases, progress=False, resume=path)
    assert all(row.resumed for row in again)
    assert [row.label for row in again] == [Label(False, "not what I asked"), None,
                                            Label(True, "")]
