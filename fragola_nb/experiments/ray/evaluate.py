"""``agent.evaluate(..., backend="ray")``: the rows run on Ray workers, as ``batch`` runs its
inputs there (``fragola_nb.experiments.ray``), one batch per variant; each row comes back with
its fork rebuilt here, is given its trajectory (``evaluate/talk.py``) and graded here as a
local row.
A conversation (``turns``, a ``SimulatedUser`` without ``fragola=``) and ``decide`` are sent
to the workers (Ray's cloudpickle) and run there by the same code as locally, so the rows are
the same.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.core.usage import Usage
from fragola_nb.experiments.batch.run import run_batch
from fragola_nb.experiments.evaluate.talk import with_talk
from fragola_nb.experiments.shared import answer_text

if TYPE_CHECKING:
    from fragola_nb.experiments.evaluate.run import EvaluationRun

__all__ = ["run_rows_on_ray"]


async def run_rows_on_ray(run: EvaluationRun, backend: Any, concurrency: int) -> None:
    """Run what ``run`` has left on Ray, variant by variant; rows arrive by ``run.finish_row``."""
    if any(case.user is not None and case.user.fragola is not None for case in run.cases):
        raise BadUsage("a SimulatedUser(fragola=...) cannot be sent to Ray workers: leave "
                       "fragola= out (the workers' Fragola plays the user)")
    repeat = run.evaluation.repeat
    where = {(c.index, v, r): index for index, (c, v, r) in enumerate(run.jobs)}
    for variant, base in run.bases.items():
        if run.stopping:
            return
        left = [case for case in run.cases
                if any(not run.evaluation[where[(case.index, variant, r)]].finished
                       for r in range(repeat))]
        if not left:
            continue
        result = await run_batch(base, [run.script(case) for case in left], concurrency,
                                 resume=None, progress=False, backend=backend,
                                 repeat=repeat, budget=None)
        for done in result:
            case = left[done.index // repeat]
            index = where[(case.index, variant, done.repeat)]
            row = run.evaluation[index]
            if row.finished:
                continue
            fork = done.fork
            row = replace(row, status=done.status, error=done.error, fork=fork,
                          answer=None if fork is None else answer_text(fork, fork.fork_point),
                          usage=done.usage or Usage(), seconds=done.seconds)
            row = with_talk(row, fork, done.talk, run.agent.fragola.prices)
            if row.status in ("done", "failed"):
                row = await run.graded(row)
            run.finish_row(index, row)
