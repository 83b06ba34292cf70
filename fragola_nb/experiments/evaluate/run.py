"""``agent.evaluate``: cases × variants × repeats, each on its own fork, graded.

    evaluation = await agent.evaluate(
        [{"input": "Capital of {country}?", "expected": "Paris", "country": "France"}, ...],
        {"terse": {"instructions": "One word."}, "chatty": {"instructions": "Explain."}},
        graders=[contains("Paris"), max_tokens(200)], repeat=3)
    evaluation.summary()          # per variant: pass rate, pass@k, pass^k, cost, p50/p95 s
    evaluation.diff("last.json")  # improved / regressed / unchanged / new / gone

As in ``agent.batch``, every (case, variant, repeat) runs ``user_message`` on a fork of a
snapshot of the agent taken when the call starts (its history is the shared prefix; the
forks stay out of the fork tree, each kept by its row), at most ``concurrency`` at once, and
the agent itself is left as it was. Variants are those ``compare`` takes (default: the agent
as it is, named ``"base"``). Each finished run is graded (see ``fragola_nb.graders``): a
grader that raises is a failed grade, never a lost row. The repeat index reaches the model
client (``REPEAT_INDEX``), so a ``Fragola.cached`` model keeps one answer per repeat.

``budget=`` (a ``Budget``) covers every run and judge of the call: once spent, nothing more
is sent, the runs in flight end with outcome ``"budget"`` and the rows not started are
``"not run: budget"``. On ``Fragola.cached`` the rows its file answers keep filling in (a
hit costs nothing); a row that would send a request ends ``"not run: budget"``.
``stop()``, ``stop_sync()``, an interrupt and ``resume=PATH`` behave as for batch (see
``resume``). A case's conversation (``turns``, a ``SimulatedUser``) and ``decide=`` run by
``conversation``; ``backend="ray"`` runs the rows on Ray (``ray/evaluate.py``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from os import PathLike
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redacted
from fragola_nb.core.limits import Meter, check_budget, spending
from fragola_nb.core.usage import Usage
from fragola_nb.experiments.compare.run import apply_variant, check_variants
from fragola_nb.experiments.conversation import Decide, Script, Talk, converse
from fragola_nb.experiments.evaluate.cases import Case, check_cases
from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.evaluate.evaluation import EVALUATION_WATCHERS, Evaluation
from fragola_nb.experiments.evaluate.resume import EvalResumeFile, run_header
from fragola_nb.experiments.evaluate.setups import make_setup
from fragola_nb.experiments.evaluate.talk import talk_verdict, with_talk
from fragola_nb.experiments.graders.apply import graded_row, unique_names
from fragola_nb.experiments.graders.base import check_graders
from fragola_nb.experiments.graders.stop import GradingStop, judge_models
from fragola_nb.experiments.shared import (
    answer_text,
    check_repeat,
    error_line,
    experiment_ended,
    stop_at_once,
    undone_on_error,
    worker_pool,
    wrap_text,
)
from fragola_nb.models.recording.cache import REPEAT_INDEX

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["EvaluationRun", "run_evaluate"]

NOT_RUN = "not run: the evaluation was stopped before this row started"
STOPPED = "stopped: the evaluation was stopped at once (stop_sync(), Stop) while this row ran"

_log = logging.getLogger("fragola_nb")


async def run_evaluate(agent: Agent, cases: Any, variants: Mapping[str, Any] | None,
                       graders: Any, *, repeat: int, concurrency: int,
                       resume: str | PathLike[str] | None, budget: Any,
                       progress: bool, decide: Decide | None = None,
                       backend: Any = "local") -> Evaluation:
    """``agent.evaluate``: see the module's docstring."""
    checked = check_cases(cases)
    if decide is not None and not callable(decide):
        raise BadUsage(f"decide must be a callable (call) -> Decision | bool | None, not "
                       f"{type(decide).__name__}")
    if backend != "local":  # a bad one is refused before anything is opened or sent
        from fragola_nb.experiments.ray.backend import backend_of

        backend = backend_of(backend)
    repeat = check_repeat(repeat)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise BadUsage(f"concurrency must be a whole number >= 1, got {concurrency!r}")
    chosen = check_graders(graders)
    names = unique_names(chosen)
    overrides = ([("base", {"model_settings": dict(agent.options.model_settings)})]
                 if variants is None else check_variants(agent, variants))
    if agent.status != "idle":
        raise BadUsage(f"agent {agent.name!r} is {agent.status}: an evaluation starts from an "
                       "idle agent (await or stop() what runs, decide what waits)")
    models = {str(o["model_settings"].get("model") or agent.fragola.model)
              for _, o in overrides} | set(judge_models(chosen, agent.fragola))
    models |= {str(c.user.model or (c.user.fragola or agent.fragola).model)  # simulated users
               for c in checked if c.user is not None}
    known = frozenset(agent.fragola.credentials(agent.options.model_settings))
    with contextlib.ExitStack() as stack:
        # Entered first: a usd budget (this one, the Fragola's) on a model without a known
        # price (a variant's, a judge's, a simulated user's) is refused before anything is
        # opened or sent.
        meter = stack.enter_context(spending(check_budget(budget), fragola=agent.fragola,
                                             models=sorted(models)))
        file = None
        if resume is not None:
            file = EvalResumeFile(resume, run_header([c.key for c in checked],
                                                     [n for n, _ in overrides], names),
                                  agent.fragola.prices, known)
            stack.callback(file.close)
        base = agent.detached_fork(f"{agent.name}-eval")
        bases = {name: apply_variant(base.detached_fork(f"{agent.name}-{name}"), override)
                 for name, override in overrides}
        run = EvaluationRun(agent, checked, bases, chosen, names, repeat, file, meter, known)
        run.decide = decide
        # hidden at once: setup_changes, reprs and files show it (a key in instructions too)
        run.evaluation.setup = redacted(make_setup(checked, bases, agent.fragola.model, names,
                                                   repeat), known)
        with undone_on_error(agent):
            agent.experiment_began(run.stop, f"evaluation of {len(run.jobs):,} runs")
        try:
            shown = False  # by a live view (a kernel's matrix): then no bar below it
            # progress=False: no live view either (neither the bar nor a kernel's matrix)
            for watcher in list(EVALUATION_WATCHERS) if progress else ():
                try:
                    shown = bool(watcher.started(run.evaluation)) or shown
                except Exception:  # a view must not stop the evaluation it shows
                    _log.exception("fragola_nb: an evaluation view failed to start")
            run.open_bar(progress and not shown)
            stack.callback(run.bar.close)
            if backend is not None and backend != "local":
                from fragola_nb.experiments.ray.evaluate import run_rows_on_ray

                await run_rows_on_ray(run, backend, concurrency)
            else:
                await run.run(concurrency)
        finally:
            experiment_ended(agent, run.stop)
            run.finish()
    return run.evaluation


class EvaluationRun:
    """One ``agent.evaluate`` call in flight: its jobs, the rows so far, the bar."""

    def __init__(self, agent: Agent, cases: list[Case], bases: dict[str, Agent],
                 graders: Sequence[Any], names: list[str], repeat: int,
                 file: EvalResumeFile | None, meter: Meter, known: frozenset[str]) -> None:
        self.agent, self.cases, self.bases, self.file, self.meter = agent, cases, bases, file, meter
        self.graders, self.names = graders, names
        self.jobs = [(case, variant, r) for case in cases for variant in bases
                     for r in range(repeat)]
        rows = []
        for case, variant, r in self.jobs:
            kept = file.rows.get((case.index, variant, r)) if file is not None else None
            rows.append(kept if kept is not None and kept.input == case.input else EvalRow(
                case=case.index, input=case.input, variant=variant, repeat=r,
                expected=case.expected, vars=case.vars,
                turns=case.turns if len(case.turns) > 1 else (), tags=case.tags))
        self.evaluation = Evaluation(rows, variants=list(bases), graders=names, repeat=repeat)
        self.evaluation.known = known
        self.evaluation.resume = file  # a label given later is appended to it
        self.evaluation.done = False
        self.todo = iter([i for i, row in enumerate(rows) if not row.finished])
        self.running: dict[int, Agent] = {}
        self.grading = GradingStop()
        self.stopping = False
        self.started = time.perf_counter()
        self.passed = sum(1 for row in rows if row.passed)
        self.failed = sum(1 for row in rows if row.finished and not row.passed)
        self.tokens = sum(row.tokens or 0 for row in rows)
        self.decide: Decide | None = None

    def script(self, case: Case) -> Script:
        """What ``case`` says to its fork."""
        return Script(case.turns, case.user, self.decide)

    def open_bar(self, progress: bool) -> None:
        """The progress bar (``progress=False``: one that shows nothing)."""
        from tqdm.auto import tqdm  # type: ignore[import-untyped,unused-ignore]

        rows = self.evaluation
        self.bar = tqdm(total=len(rows), initial=sum(1 for r in rows if r.finished),
                        disable=not progress, unit=" run", dynamic_ncols=True)
        self.bar.set_description_str(f"evaluate {self.agent.name}", refresh=False)
        wrap_text(self.bar)
        self._show()

    def _show(self) -> None:
        self.bar.set_postfix_str(f"passed={self.passed}, failed={self.failed}, "
                                 f"tokens={self.tokens:,}", refresh=False)

    async def run(self, concurrency: int) -> None:
        left = sum(1 for row in self.evaluation if not row.finished)
        await worker_pool(self._work, min(concurrency, left), self._halt)

    def _halt(self) -> None:
        self.stopping = True

    def _spent(self) -> str | None:
        """Why no more runs start: this call's budget or the Fragola's is spent."""
        own = self.agent.fragola.meter
        return self.meter.spent or (own.spent if own is not None else None)

    async def _work(self) -> None:
        cached = self.agent.fragola.answers_from_cache  # hits go on: they cost nothing
        for index in self.todo:  # one iterator shared by the workers
            if self.stopping or (self._spent() and not cached):
                return
            case, variant, repeat = self.jobs[index]
            row = self.evaluation[index]
            started = time.perf_counter()
            fork: Agent | None = None
            talk: Talk | None = None
            REPEAT_INDEX.set(repeat)  # this worker task's own context
            try:
                fork = self.bases[variant].detached_fork(
                    f"{self.agent.name}-{variant}-case{case.index}-r{repeat}")
                fork.fork_of = self.agent.id
                self.running[index] = fork
                self.evaluation.set_row(index, replace(row, status="running"))
                talk = await converse(fork, self.script(case))
            except Exception as exc:
                status, error = "failed", error_line(exc)  # type: str, str | None
            else:
                status, error = talk_verdict(fork, talk)
                state = talk.state
                if status == "stopped":
                    error = STOPPED
                if state is not None and state.outcome == "budget":  # unfinished
                    status, error = "not run", f"not run: budget ({state.spent or 'spent'})"
            finally:
                self.running.pop(index, None)
            done = with_talk(self._row(row, fork, started, status, error), fork, talk,
                             self.agent.fragola.prices)
            if done.status in ("done", "failed"):
                done = await self.graded(done)
            self.finish_row(index, done)

    def _row(self, row: EvalRow, fork: Agent | None, started: float, status: Any,
             error: str | None) -> EvalRow:
        return replace(row, status=status, error=error, fork=fork,
                       answer=None if fork is None else answer_text(fork, fork.fork_point),
                       usage=fork.usage if fork is not None else Usage(),
                       seconds=time.perf_counter() - started)

    async def graded(self, row: EvalRow) -> EvalRow:
        if not self.graders:
            return row
        graded = graded_row(row.input, row.answer, row.fork, row.usage, row.seconds,
                            expected=row.expected, vars=row.vars, variant=row.variant,
                            repeat=row.repeat, tool_calls=row.tool_calls,
                            answers=row.answers or None, ended=row.ended)
        grades = await self.grading.grades(graded, self.graders, self.names)
        if grades is None:  # stop_sync() cut its grading: unfinished, runs again on resume
            return replace(row, status="stopped", error=STOPPED)
        judged = sum((g.usage for g in grades if g.usage is not None), Usage())
        return replace(row, grades=grades, judge_usage=judged if judged.calls else None)

    def finish_row(self, index: int, row: EvalRow) -> None:
        self.evaluation.set_row(index, row)
        if not row.finished:
            return  # stopped or cut by the budget: not written, runs again on resume
        if self.file is not None:
            self.file.write(row)
        if row.passed:
            self.passed += 1
        else:
            self.failed += 1
        self.tokens += row.tokens or 0
        self._show()
        self.bar.update()

    def stop(self, at_once: bool) -> None:
        """``agent.stop()`` (``False``: nothing more starts) and ``stop_sync()`` (``True``:
        the running forks are stopped too)."""
        self.stopping = True
        for base in self.bases.values():  # on Ray: each variant's batch
            if base.experiments:
                (base.stop_sync if at_once else base.stop)()
        if not at_once:
            return
        self.grading.stop()
        stop_at_once(self.running.values())

    def finish(self) -> None:
        evaluation = self.evaluation
        spent = self._spent()
        why = f"not run: budget ({spent})" if spent else NOT_RUN
        evaluation.end_unfinished(why, STOPPED)
        evaluation.seconds = time.perf_counter() - self.started
        evaluation.stopped = self.stopping or bool(spent)
        evaluation.why_stopped = f"budget: {spent}" if spent else None
        evaluation.done = True
        evaluation.notify(None)

