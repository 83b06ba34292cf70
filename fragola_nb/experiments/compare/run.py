"""``agent.compare``: one message, several variants, each on its own fork, side by side.

    comparison = await agent.compare("Explain DNS.", {
        "short": {"instructions": "Answer in one sentence."},
        "strict": {"instructions": "Answer in detail.", "model_settings": {"temperature": 0}},
        "mini": {"model": "gpt-4o-mini", "tools": []},
    })
    comparison["short"]        # the fork that ran the "short" variant (an Agent)
    comparison.table()         # one row dict per variant, in variant order
    comparison.to_pandas()     # the same rows as a DataFrame (pip install fragola_nb[pandas])

A variant overrides ``instructions``, ``model`` (the model of that fork), ``model_settings``
(merged over the agent's) and ``tools`` (replacing the agent's list). Every variant is checked
before any fork is made, so a mistake leaves nothing half made. Each variant then runs
``message`` on ``agent.fork(name)`` (the forks show in the fork tree), at most ``concurrency``
at once. ``repeat=k`` runs each variant k times (forks ``name``, ``name#2``...);
``graders`` (see ``fragola_nb.graders``) grade each finished run: its row gains ``passed``,
``score`` and ``grades``.

A variant that fails (the API, a listener, the step limit) is a row with its error, one line;
the others go on. A variant that pauses for approval is a row whose status is ``"waiting"``,
its fork left waiting: decide its calls (in its panel, or ``comparison[name].approve(id)``)
and ``await comparison[name].step()``. ``agent.stop()`` starts no more variants and lets the
running ones finish their operation in flight; ``agent.stop_sync()`` cancels them at once;
either way ``compare`` returns what is done. ``budget=Budget(...)`` meters all the variants
together: once spent no variant starts (status ``"budget"``, error ``"not run: budget (...)"``)
and a running one ends before its next model call (status ``"budget"``, its error the
fork's ``state.spent``). An interrupt (Ctrl-C, the kernel's Interrupt)
cancels the variants still running, keeps the forks, and is raised again.

The notebook layer shows a live grid through ``WATCHERS``; the core imports nothing of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fragola_nb.base.checks import check_content, normalize_instructions
from fragola_nb.base.errors import BadUsage, InvalidToolDefinition
from fragola_nb.core.limits import Budget, Meter, check_budget, spending
from fragola_nb.core.tools import Tool, check_tools
from fragola_nb.experiments.compare.comparison import WATCHERS, Comparison, VariantRun
from fragola_nb.experiments.graders.apply import graded_row, unique_names
from fragola_nb.experiments.graders.base import check_graders
from fragola_nb.experiments.graders.stop import GradingStop, judge_models
from fragola_nb.experiments.shared import (
    NOT_RUN_BUDGET,
    answer_text,
    check_repeat,
    error_line,
    experiment_ended,
    undone_on_error,
)
from fragola_nb.models.client import settings_problem
from fragola_nb.models.recording.cache import REPEAT_INDEX

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.state import AgentState

__all__ = ["VARIANT_KEYS", "apply_variant", "check_variants", "run_compare"]

_log = logging.getLogger("fragola_nb")

VARIANT_KEYS = ("instructions", "model", "model_settings", "tools")
"""What a variant may override."""


async def run_compare(
    agent: Agent, message: str, variants: Mapping[str, Mapping[str, Any]], concurrency: int,
    *, graders: Any = (), repeat: int = 1, budget: Budget | None = None,
) -> Comparison:
    """``agent.compare(message, variants, concurrency)``; see the module's docstring."""
    content = check_content(message)
    repeat = check_repeat(repeat)
    chosen = check_graders(graders)
    names = unique_names(chosen)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise BadUsage(f"concurrency must be a whole number >= 1, got {concurrency!r}")
    overrides = check_variants(agent, variants)
    check_budget(budget)
    if agent.status != "idle":
        raise BadUsage(f"agent {agent.name!r} is {agent.status}: compare it once it is idle")
    models = [override["model_settings"].get("model", agent.fragola.model)
              for _, override in overrides] + judge_models(chosen, agent.fragola)
    # Every variant's model priced (a usd budget) before any fork is made; the variants'
    # turns are tasks made inside, so the one meter counts them all.
    with spending(budget, fragola=agent.fragola, models=models) as meter:
        return await _compare(agent, content, overrides, concurrency, meter,
                              (chosen, names, repeat))


async def _compare(agent: Agent, content: Any, overrides: list[tuple[str, dict[str, Any]]],
                   concurrency: int, meter: Meter,
                   grading: tuple[Sequence[Any], list[str], int]) -> Comparison:
    chosen, names, repeat = grading
    runs: list[VariantRun] = []
    stopping = False
    grading_stop = GradingStop()

    def stopper(at_once: bool) -> None:
        nonlocal stopping
        stopping = True
        if at_once:
            grading_stop.stop()
        for run in runs:
            if run.status == "running":
                run.fork.stop_sync() if at_once else run.fork.stop()

    async def one(run: VariantRun) -> None:
        async with gate:
            if stopping:
                comparison.update(run, "not_started", "stopped before it started")
                return
            spent = meter.spent or (agent.fragola.meter.spent if agent.fragola.meter else None)
            if spent is not None:
                comparison.update(run, "budget", f"{NOT_RUN_BUDGET} ({spent})")
                return
            comparison.start(run)
            REPEAT_INDEX.set(run.repeat)  # this task's own context
            try:
                state = await run.fork.user_message(content)
            except (asyncio.CancelledError, KeyboardInterrupt):
                comparison.update(run, "cancelled", "cancelled by an interrupt")
                raise
            except Exception as exc:  # a row with its error; the other variants go on
                comparison.update(run, "failed", error_line(exc))
            else:
                status, error = _ending(run, state)
                if chosen and status in ("finished", "step_limit", "waiting"):
                    if not await _grade(run, content, grading_stop, chosen, names):
                        status, error = "stopped", "stopped while it was graded"
                comparison.update(run, status, error)

    # A listener of the agent's after_state_update that raises on the "fork" or "experiment"
    # event ends the call here, with nothing left half made.
    with undone_on_error(agent, stopper):
        for name, override in overrides:
            for r in range(repeat):
                label = name if r == 0 else f"{name}#{r + 1}"
                runs.append(VariantRun(label, _fork(agent, label, override), repeat=r))
        agent.experiment_began(stopper, f"compare of {len(runs)} variants")
    comparison = Comparison(agent, content, runs)
    for watcher in list(WATCHERS):
        try:
            watcher.started(comparison)
        except Exception:  # a view must not stop the experiment it shows
            _log.exception("fragola_nb: a compare view failed to start")
    gate = asyncio.Semaphore(concurrency)
    tasks = [asyncio.ensure_future(one(run)) for run in runs]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        # An interrupt: the variants still running are cancelled (each fork repairs its
        # history), those not started never start; what finished is kept.
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        for run in runs:
            if run.status == "queued":
                comparison.update(run, "cancelled", "cancelled by an interrupt before it started")
        raise
    finally:
        experiment_ended(agent, stopper)
        comparison.done = True
        comparison.notify(None)
    return comparison


async def _grade(run: VariantRun, content: Any, grading: GradingStop, graders: Sequence[Any],
                 names: list[str]) -> bool:
    """Grade a finished variant into ``run.grades``; False when ``stop_sync()`` cut it."""
    fork = run.fork
    graded = graded_row(content, answer_text(fork, fork.fork_point), fork, fork.usage,
                        run.seconds, variant=run.name, repeat=run.repeat)
    grades = await grading.grades(graded, graders, names)
    run.grades = grades or ()
    return grades is not None


def _ending(run: VariantRun, state: AgentState) -> tuple[str, str | None]:
    """A finished ``user_message``'s row status and error."""
    outcome = state.outcome
    if outcome == "finished":
        return "finished", None
    if outcome == "paused":
        return "waiting", None
    if outcome == "budget":
        return "budget", run.fork.state.spent
    if outcome == "step_limit":
        return "step_limit", (
            f"StepLimit: no final answer within {run.fork.options.max_step} model calls "
            f"(`await comparison[{run.name!r}].step()` goes on)")
    if _ends_in_answer(run.fork):
        # ``stop()`` let the reply in flight finish, and it was the final answer.
        return "finished", None
    return "stopped", "stopped before a final answer"


def _ends_in_answer(fork: Agent) -> bool:
    """The fork's own messages end with an assistant reply that calls no tool."""
    mine = fork.messages_since(fork.fork_point)
    last = mine[-1] if mine else None
    return (last is not None and last.get("role") == "assistant"
            and not last.get("tool_calls") and answer_text(fork, fork.fork_point) is not None)


def check_variants(
    agent: Agent, variants: Mapping[str, Mapping[str, Any]]
) -> list[tuple[str, dict[str, Any]]]:
    """Every variant checked (a ``BadUsage`` naming it otherwise) and normalized to
    ``(name, overrides)``, the model settings merged over the agent's; nothing is made."""
    if not isinstance(variants, Mapping):
        raise BadUsage(f"variants must be a dict of name -> overrides, got "
                       f"{type(variants).__name__}")
    if not variants:
        raise BadUsage("variants is empty: give at least one name -> overrides")
    checked = []
    for name, override in variants.items():
        if not isinstance(name, str) or not name.strip():
            raise BadUsage(f"a variant's name must be a non-empty string, got {name!r}")
        checked.append((name, _check_variant(agent, name, override)))
    return checked


def _check_variant(agent: Agent, name: str, override: Any) -> dict[str, Any]:
    where = f"variant {name!r}"
    if not isinstance(override, Mapping):
        raise BadUsage(f"{where}: overrides must be a dict, got {type(override).__name__}")
    unknown = [key for key in override if key not in VARIANT_KEYS]
    if unknown:
        raise BadUsage(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                       f"a variant may set {', '.join(VARIANT_KEYS)}")
    out: dict[str, Any] = {}
    if "instructions" in override:
        try:
            out["instructions"] = normalize_instructions(override["instructions"])
        except BadUsage as exc:
            raise BadUsage(f"{where}: {exc}") from None
    settings = override.get("model_settings", {})
    if not isinstance(settings, Mapping):
        raise BadUsage(f"{where}: model_settings must be a dict, got {type(settings).__name__}")
    model = override.get("model")
    if "model" in override:
        if not isinstance(model, str) or not model.strip():
            raise BadUsage(f"{where}: model must be a non-empty string, got {model!r}")
        if "model" in settings and settings["model"] != model:
            raise BadUsage(f"{where}: two models ({model!r} and model_settings' "
                           f"{settings['model']!r}): give one")
    merged = {**agent.options.model_settings, **settings}
    if model is not None:
        merged["model"] = model
    problem = settings_problem(merged)
    if problem:
        raise BadUsage(f"{where}: {problem}")
    out["model_settings"] = merged
    if "tools" in override:
        out["tools"] = _check_tools(where, override["tools"])
    return out


def _check_tools(where: str, tools: Any) -> list[Tool]:
    if isinstance(tools, (str, bytes, Mapping, Tool)) or not isinstance(tools, Iterable):
        raise BadUsage(f"{where}: tools must be a list of tools, got {type(tools).__name__}")
    try:
        return list(check_tools(tools))
    except InvalidToolDefinition as exc:
        raise InvalidToolDefinition(f"{where}: {exc}") from None


def _fork(agent: Agent, name: str, override: dict[str, Any]) -> Agent:
    return apply_variant(agent.fork(name), override)


def apply_variant(fork: Agent, override: dict[str, Any]) -> Agent:
    """``fork`` with a variant's checked overrides (``check_variants``) set."""
    options = fork.options
    options.model_settings = override["model_settings"]
    if "instructions" in override:
        options.instructions = override["instructions"]
    if "tools" in override:
        options.tools = override["tools"]
    return fork
