"""The grading of one experiment, which ``stop_sync()`` cancels at once.

A run's fork is stopped by its own ``stop_sync``; its graders run after it, outside any fork
(a ``judge`` on an agent of its own, a grader's own requests), so an experiment's stopper
asks this too: every grading in flight is cancelled (a judge's request in flight included,
whose server may never answer), and none starts after. The rows keep what finished; a row
whose grading was cancelled has no grades. ``stop_sync`` may be called from another thread:
each task is cancelled on its own loop.

Up front, before anything is sent: a ``judge`` on a model without a known price under a usd
budget is refused like the runs' own models (``judge_models``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fragola_nb.experiments.graders.apply import grades_of
from fragola_nb.experiments.graders.judge import Judge

if TYPE_CHECKING:
    from fragola_nb.core.fragola import Fragola
    from fragola_nb.experiments.graders.base import Grade, GradedRow

__all__ = ["GradingStop", "judge_models"]


class GradingStop:
    """The graders of one experiment in flight (see the module)."""

    def __init__(self) -> None:
        self.stopped = False
        self._lock = threading.Lock()
        self._tasks: dict[asyncio.Task[Any], asyncio.AbstractEventLoop] = {}

    async def grades(self, row: GradedRow, graders: Sequence[Any], names: Sequence[str]
                     ) -> tuple[Grade, ...] | None:
        """``grades_of(row, graders, names)``, or None when a stop at once came first or
        cancelled it. A cancellation of the caller itself (an interrupt) goes on."""
        if self.stopped:
            return None
        task = asyncio.ensure_future(grades_of(row, graders, names))
        with self._lock:
            self._tasks[task] = asyncio.get_running_loop()
        if self.stopped:  # stop() ran between the check and the registration
            task.cancel()
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self.stopped and (current is None or not current.cancelling()):
                return None
            raise
        finally:
            with self._lock:
                self._tasks.pop(task, None)

    def stop(self) -> None:
        """Cancel every grading in flight; none starts after."""
        self.stopped = True
        with self._lock:
            held = list(self._tasks.items())
        for task, loop in held:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                task.cancel()
            else:
                try:
                    loop.call_soon_threadsafe(task.cancel)
                except RuntimeError:  # its loop is closed: nothing runs there any more
                    pass


def judge_models(graders: Sequence[Any], fragola: Fragola) -> list[str]:
    """The models the ``judge`` graders among ``graders`` call (their ``model=``, else their
    Fragola's model, else ``fragola``'s)."""
    return [str(g.model or (g.fragola or fragola).model) for g in graders
            if isinstance(g, Judge)]
