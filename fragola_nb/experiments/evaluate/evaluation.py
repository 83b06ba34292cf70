"""``Evaluation``: what ``agent.evaluate`` returns, one ``EvalRow`` per case × variant × repeat.

>>> evaluation = await agent.evaluate(cases, variants, graders=[contains("Paris")]) # doctest: +SKIP
>>> evaluation.summary()[0]["pass_rate"]                        # doctest: +SKIP
0.9
>>> evaluation.save("run1.json"); evaluation.diff("run0.json")  # doctest: +SKIP

Rows are in case order, then variant, then repeat. While ``evaluate`` runs, the rows change
as they finish and ``subscribe``'d views hear of each (the notebook's matrix view).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from fragola_nb.base.errors import BadUsage, exception_text
from fragola_nb.base.redact import redacted, redacted_texts
from fragola_nb.base.render import visible
from fragola_nb.core.usage import ModelPrice, Usage
from fragola_nb.experiments.evaluate.evalrow import EvalRow, grade_record
from fragola_nb.experiments.evaluate.header import run_of, usage_read_back
from fragola_nb.experiments.evaluate.summary import rate_text, usage_total
from fragola_nb.experiments.evaluate.versus import Judgements
from fragola_nb.experiments.shared import import_pandas
from fragola_nb.sessions.atomic import atomic_write

if TYPE_CHECKING:
    from fragola_nb.experiments.evaluate.diff import EvaluationDiff
    from fragola_nb.experiments.evaluate.resume import EvalResumeFile

__all__ = ["EVALUATION_WATCHERS", "Evaluation"]

_log = logging.getLogger("fragola_nb")

EVALUATION_WATCHERS: list[Any] = []
"""Registered by the notebook layer: ``watcher.started(evaluation)`` when ``agent.evaluate``
has made the rows, true when it shows the evaluation live (no progress bar then; not called
with ``progress=False``), and ``watcher.mimebundle(evaluation)``, how to display one. The core
imports nothing of it."""

FORMAT = "fragola_nb.evaluation/1"


class Evaluation(Sequence[EvalRow], Judgements):
    """The rows of one ``agent.evaluate`` call, with ``table()``, ``summary()``,
    ``to_pandas()``, ``save(path)``/``Evaluation.load(path)`` and ``diff(baseline)``; and
    (``Judgements``) ``versus``, ``verdicts``, ``label``, ``agreement``, ``judge_pairs``."""

    def __init__(self, rows: Iterable[EvalRow], *, variants: Sequence[str],
                 graders: Sequence[str], repeat: int, seconds: float = 0.0,
                 stopped: bool = False, why_stopped: str | None = None) -> None:
        self._rows = list(rows)
        self.variants = tuple(variants)
        """The variants' names, in order."""
        self.graders = tuple(graders)
        """The graders' names, in order."""
        self.repeat = repeat
        self.seconds = seconds
        """Wall time of the call."""
        self.stopped = stopped
        """Stopped (``stop()``, ``stop_sync()``, the budget) before every row ran."""
        self.why_stopped = why_stopped
        """The budget's one line when it stopped the evaluation, else None."""
        self.done = True
        """False while ``evaluate`` still runs."""
        self.baseline: EvaluationDiff | None = None
        """Set by ``diff``: the last comparison with a baseline (views mark it)."""
        self._observers: list[Callable[[int | None], None]] = []
        self.known: frozenset[str] = frozenset()
        """Credentials in use when it ran (set by ``evaluate``): hidden in what ``save``
        writes and the views show, should a model or a tool have echoed one."""
        self.setup: dict[str, Any] | None = None
        """What it ran with (set by ``evaluate``, kept by ``save``): a hash of the cases and,
        per variant, instructions, model, settings, tools and graders (see ``setups``)."""
        self.pairs_usage = Usage()
        """The calls of ``judge_pairs``, apart from the graded calls and the judges'."""
        self._kept: dict[Any, tuple[tuple[EvalRow, ...], Any]] = {}
        self.resume: EvalResumeFile | None = None
        """The resume file of the run (``evaluate(resume=...)``): a label is appended to it."""

    # -- the rows ---------------------------------------------------------------------------
    @overload
    def __getitem__(self, index: int) -> EvalRow: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[EvalRow]: ...

    def __getitem__(self, index: int | slice) -> EvalRow | Sequence[EvalRow]:
        return self._rows[index] if isinstance(index, int) else tuple(self._rows[index])

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[EvalRow]:  # not Sequence's, an index at a time
        return iter(self._rows)

    @property
    def cases(self) -> int:
        return len({row.case for row in self._rows})

    def cell(self, case: int, variant: str) -> list[EvalRow]:
        """The rows (one per repeat) of ``case`` (its index) on ``variant``."""
        def group(rows: tuple[EvalRow, ...]) -> dict[tuple[int, str], list[EvalRow]]:
            cells: dict[tuple[int, str], list[EvalRow]] = {}
            for row in rows:
                cells.setdefault((row.case, row.variant), []).append(row)
            return cells

        return list(self._once("cells", group).get((case, variant), ()))

    def _once(self, key: Any, make: Callable[[tuple[EvalRow, ...]], Any]) -> Any:
        # ``make(rows)`` once for the same rows (frozen: a changed row is a new object), so
        # the matrix, its title, the repr and the static table of one display share it.
        rows = tuple(self._rows)
        kept = self._kept.get(key)
        if kept is None or len(kept[0]) != len(rows) or not all(map(operator.is_, kept[0], rows)):
            kept = self._kept[key] = (rows, make(rows))
        return kept[1]

    @property
    def usage(self) -> Usage:
        """The graded calls of every row (a cached call counted, costing nothing)."""
        return usage_total(row.usage for row in self._rows)

    @property
    def judge_usage(self) -> Usage:
        """The calls of the ``judge`` graders and of ``judge_pairs``, apart from the graded
        calls."""
        return usage_total((row.judge_usage for row in self._rows), self.pairs_usage)

    # -- live views ---------------------------------------------------------------------------
    def subscribe(self, observer: Callable[[int | None], None]) -> None:
        """``observer(index)`` after row ``index`` changes, ``observer(None)`` at the end."""
        self._observers.append(observer)

    def set_row(self, index: int, row: EvalRow) -> None:
        self._rows[index] = row
        self.notify(index)

    def end_unfinished(self, why: str, stopped: str) -> None:
        """At the end of the run: a row still queued or running did not run (its error
        ``why``), a stopped row with no error gets ``stopped``. The observers hear of it with
        the end (``notify(None)``)."""
        for index, row in enumerate(self._rows):
            if row.status in ("queued", "running"):
                self._rows[index] = dataclasses.replace(row, status="not run", error=why)
            elif row.status == "stopped" and row.error is None:
                self._rows[index] = dataclasses.replace(row, error=stopped)

    def notify(self, index: int | None) -> None:
        for observer in list(self._observers):
            try:
                observer(index)
            except Exception:  # a view must not stop what it shows
                _log.exception("fragola_nb: an evaluation view failed on an update")

    # -- as data ----------------------------------------------------------------------------
    def table(self) -> list[dict[str, Any]]:
        """One dict per row: case, input, variant, repeat, status, passed, score, grades
        (name -> passed, score and reason; a judge's raw_score and scale too), answer, error,
        tokens, cost, cached, seconds, and the trajectory: tool_calls, model_calls, answers
        (each turn's), ended; tags, label (``{"passed", "note"}`` or None) and flaky (its
        cell's repeats disagree); no credential (``fragola_nb.base.redact``: a key a server
        quoted back in an answer)."""
        from fragola_nb.experiments.evaluate.evalrow import flaky_cells

        flaky = flaky_cells(self._rows)
        rows = [{"case": row.case, "input": row.input, "variant": row.variant,
                 "repeat": row.repeat, "status": row.status, "passed": row.passed,
                 "score": row.score,
                 "grades": {g.name: _without_name(grade_record(g)) for g in row.grades},
                 "answer": row.answer, "error": row.error, "tokens": row.tokens,
                 "cost": row.cost, "cached": row.cached, "seconds": row.seconds,
                 "tool_calls": [dict(c) for c in row.tool_calls], "model_calls": row.model_calls,
                 "answers": list(row.answers), "ended": row.ended,
                 "tags": list(row.tags), "flaky": (row.case, row.variant) in flaky,
                 "label": None if row.label is None else {"passed": row.label.passed,
                                                          "note": row.label.note}}
                for row in self._rows]
        return list(redacted_texts(rows, self.known))

    def to_pandas(self) -> Any:
        """``table()`` as a DataFrame, each grader's verdict a column of its own (named
        after it) and its reason in ``"<name>: reason"``."""
        pandas = import_pandas("Evaluation.to_pandas()")
        records = []
        for row in self.table():
            grades = row.pop("grades")
            for name in self.graders:
                grade = grades.get(name) or {}
                row[name] = grade.get("passed")
                row[f"{name}: reason"] = grade.get("reason")
            records.append(row)
        frame = pandas.DataFrame.from_records(records)
        return frame.astype({"tokens": "Int64"}) if len(frame) else frame

    def summary(self, by: str | None = None) -> list[dict[str, Any]]:
        """Per variant: rows run, cases run, pass rate (and each grader's own) with its 95%
        interval ``pass_rate_ci``, mean score with ``mean_score_ci``, pass@k (cases passed
        by at least one of their k repeats) and pass^k (by all k), tokens, cost (the
        answers'), the judges' cost, the simulated users' cost, ``total_cost`` (all of them:
        what was paid) and ``cost_text`` (it in words, as the views show it), and p50/p95
        seconds. ``by="tag"``: a line per tag and variant."""
        from fragola_nb.experiments.evaluate.summary import summary_lines

        variants, graders = self.variants, self.graders
        return copy.deepcopy(self._once(("summary", by, variants, graders), lambda rows:
                                        summary_lines(rows, variants, graders, by)))

    def diff(self, baseline: Evaluation | str | os.PathLike[str]) -> EvaluationDiff:
        """This run against ``baseline`` (an ``Evaluation`` or a file ``save`` wrote),
        aligned by case (its input) and variant: improved, regressed, unchanged, new, gone."""
        from fragola_nb.experiments.evaluate.diff import EvaluationDiff

        if not isinstance(baseline, Evaluation):
            baseline = Evaluation.load(baseline)
        self.baseline = EvaluationDiff(baseline, self)
        self.notify(None)
        return self.baseline

    # -- files --------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the rows to ``path`` as JSON: a list of row objects (``pandas.read_json``
        reads it), the first holding the run's variants, graders and repeat in ``"run"``
        (and the calls of ``judge_pairs``, counted in the total as they were). No fork,
        setting, header or key is written. Written as sessions are (a temporary file beside
        it renamed over it: a crash leaves the old file or the new one, a symbolic link at
        ``path`` is replaced, never followed); a folder at ``path``, or one that cannot be
        written, is a ``BadUsage``. Returns the path."""
        target = _path(path, "save")
        if target.is_dir() and not target.is_symlink():
            raise BadUsage(f"Evaluation.save takes a file path, and {target} is a folder")
        records = redacted([row.record() for row in self._rows], self.known)
        meta = {"format": FORMAT, "variants": list(self.variants),
                "graders": list(self.graders), "repeat": self.repeat,
                "seconds": self.seconds, "stopped": self.stopped,
                "setup": redacted(self.setup, self.known),
                "pairs_usage": [dataclasses.asdict(c) for c in self.pairs_usage.calls]}
        if records:
            records[0] = {**records[0], "run": meta}
        text = json.dumps(records, ensure_ascii=False, indent=1)
        try:
            atomic_write(target, text + "\n", mode=0o644)
        except OSError as exc:  # no such folder, no permission: nothing was written
            raise BadUsage(f"Evaluation.save cannot write {target}: "
                           f"{exc.strerror or exception_text(exc)}") from None
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str],
             prices: Mapping[str, ModelPrice] | None = None) -> Evaluation:
        """An ``Evaluation`` read back from a file ``save`` wrote (rows ``resumed``, no
        forks); a ``BadUsage`` naming the file when it is not one. A field named as a
        credential (``api_key``, ``KEY``...) is read as ``"[redacted]"``, as ``save`` writes it."""
        source = _path(path, "load")
        try:
            data = json.loads(source.read_bytes())
        except FileNotFoundError:
            raise BadUsage(f"no evaluation file at {source}") from None
        except (OSError, ValueError, RecursionError) as exc:
            raise BadUsage(f"{source} is not an evaluation file: {exc}") from None
        # a field named as a credential is hidden as ``save`` hides it: a file written by hand
        # (or by an older version) cannot bring a key into the rows, and saving what was read
        # gives back the same table
        data = redacted(data)
        first = data[0] if isinstance(data, list) and data else None
        meta = first.get("run") if isinstance(first, dict) else None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise BadUsage(f"{source} is not an evaluation file (Evaluation.save writes one)")
        try:
            header = run_of(meta)
            pairs = usage_read_back(meta.get("pairs_usage"), prices or {}, "pairs_usage")
        except ValueError as exc:
            raise BadUsage(f"{source} is not an evaluation file: its header's {exc}") from None
        rows = []
        for number, record in enumerate(data):
            try:
                rows.append(EvalRow.from_record(record, prices or {}))
            except ValueError as exc:
                raise BadUsage(f"{source}, row {number}, is not an evaluation row: {exc}"
                               ) from None
        loaded = cls(rows, **header)
        setup = meta.get("setup")
        loaded.setup = setup if isinstance(setup, dict) else None
        loaded.pairs_usage = pairs
        from fragola_nb.experiments.evaluate.labels import remember

        for row in rows:
            if row.label is not None:
                remember(row)  # for graders.human()
        return loaded

    # -- shown ------------------------------------------------------------------------------
    def overview(self, lines: list[dict[str, Any]] | None = None) -> str:
        """``"10 cases × 2 variants × 3 repeats: base 80% passed, short 88% of 16 run; …"``:
        each variant's pass rate (over the rows that ran), then the tokens and the cost of
        the answers, the judges and the simulated users together (``summary()`` splits
        them). ``lines``: the
        ``summary()`` already made (a view reads it once per update)."""
        repeats = f" × {self.repeat} repeats" if self.repeat > 1 else ""
        head = (f"{self.cases} case{'s' if self.cases != 1 else ''} × {len(self.variants)} "
                f"variant{'s' if len(self.variants) != 1 else ''}{repeats}")
        parts = [f"{line['variant']} {rate_text(line)}"
                 for line in (self.summary() if lines is None else lines)]
        # one cost: what was paid, the judges' and the simulated users' calls included
        users = usage_total(row.user_usage for row in self._rows)
        usage = self.usage + self.judge_usage + users
        money = usage.cost_text()
        tail = f"{usage.total_tokens:,} tokens" + (f", {money}" if money else "")
        if not self.done:
            tail += ", running"
        elif self.stopped:
            tail += f", stopped ({self.why_stopped})" if self.why_stopped else ", stopped"
        return f"{head}: {', '.join(parts)}; {tail}; {self.seconds:.1f} s"

    def __repr__(self) -> str:
        # the overview, then each pass rate's interval and each verdict (versus)
        from fragola_nb.experiments.evaluate.versus import verdict_lines

        return visible("\n  ".join([f"Evaluation({self.overview()})", *verdict_lines(self)]))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        # The live matrix when the notebook layer is loaded; else None, and IPython uses
        # __repr__ and _repr_html_.
        for watcher in list(EVALUATION_WATCHERS):
            shown = getattr(watcher, "mimebundle", None)
            bundle = shown(self) if shown is not None else None
            if bundle is not None:
                return bundle
        return None

    def _repr_html_(self) -> str:
        from fragola_nb.experiments.evaluate.htmlview import evaluation_html

        return evaluation_html(self)


def _without_name(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key != "name"}


def _path(path: Any, what: str) -> Path:
    if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
        raise BadUsage(f"Evaluation.{what} takes a file path (a str or a pathlib.Path), got "
                       f"{type(path).__name__}")
    if not os.fspath(path).strip():
        raise BadUsage(f"Evaluation.{what} takes a file path, got an empty string")
    return Path(os.path.abspath(os.path.expanduser(path)))

