"""An ``Evaluation`` as static, escaped HTML: the summary per variant, then the matrix (cases
down, variants across, a pass/fail mark per repeat and the mean score in each cell, and the
cell's trajectory folded under it: ``trailhtml``). What a
notebook saved without its widgets shows, and the ``_repr_html_`` outside a kernel. Model and
grader text is escaped, never HTML."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fragola_nb.base.figures import percent
from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import escape, text_of
from fragola_nb.experiments.evaluate.evalrow import flaky_cells
from fragola_nb.experiments.evaluate.summary import rate_text
from fragola_nb.experiments.evaluate.trailhtml import trail_html

if TYPE_CHECKING:
    from fragola_nb.experiments.evaluate.evalrow import EvalRow
    from fragola_nb.experiments.evaluate.evaluation import Evaluation

__all__ = ["evaluation_html", "head_facts", "marks"]

SHOWN_CASES = 50
"""Cases in the static matrix; the rest are counted (``to_pandas()`` has them all)."""

_MARK = {True: "✓", False: "✗", None: "·"}


def marks(rows: list[EvalRow]) -> str:
    """One mark per repeat: ✓ passed, ✗ failed, · not run (yet)."""
    return "".join(_MARK[row.passed] for row in rows)


def head_facts(evaluation: Evaluation, lines: list[dict[str, Any]] | None = None
               ) -> list[dict[str, str]]:
    """Per variant, what the matrix's header says under its name, each a line of its own
    (the live view and the static table alike): ``rate`` (``"80% passed"``, ``"88% of 16
    run"``, ``"100% → 0%"`` against a baseline), ``cost`` (answers, judges and simulated
    users: what was paid) and ``left`` (``"44 not run"`` once done, ``"16/60"`` while it
    runs). ``lines``: its ``summary()``, when already made."""
    rates = evaluation.baseline.rates if evaluation.baseline is not None else {}
    facts = []
    for line in evaluation.summary() if lines is None else lines:
        rate = rate_text(line)
        before = rates.get(line["variant"], (None, None))[0]
        if before is not None:
            rate = f"{percent(before)} → {rate}"
        left = line["rows"] - line["ran"]
        facts.append({"rate": rate, "cost": line["cost_text"],
                      "left": "" if not left else f"{line['ran']:,}/{line['rows']:,}"
                      if not evaluation.done else f"{left:,} not run"})
    return facts


def evaluation_html(evaluation: Evaluation) -> str:
    known = evaluation.known
    summary = evaluation.summary()
    head = "".join(f"<th>{escape(name)}</th>" for name in evaluation.variants)
    lines = ['<td style="white-space:nowrap">'  # a line each, each whole
             + "<br>".join(escape(f[k]) for k in ("rate", "cost", "left") if f[k]) + "</td>"
             for f in head_facts(evaluation, summary)]
    intervals = [f"<td>{escape(interval_text(line))}</td>" for line in summary]
    cases: dict[int, EvalRow] = {}
    grouped: dict[tuple[int, str], list[EvalRow]] = {}  # one pass: cell() scans every row
    for row in evaluation:
        cases.setdefault(row.case, row)
        grouped.setdefault((row.case, row.variant), []).append(row)
    body = []
    diff = evaluation.baseline
    flaky = flaky_cells(evaluation)
    for index, first in list(cases.items())[:SHOWN_CASES]:
        cells = []
        for variant in evaluation.variants:
            rows = grouped.get((index, variant), [])
            scores = [row.score for row in rows if row.score is not None]
            score = f" {sum(scores) / len(scores):.2f}" if scores else ""
            change = diff.of(index, variant) if diff is not None else None
            note = ("" if change is None else
                    f' <span class="fx-eval-change">{escape(change.change)}</span>'
                    if change.change != "unchanged" else
                    ' <span class="fx-eval-change">other answers</span>'
                    if change.answers_changed else "")
            reasons = "; ".join(f"{g.name}: {g.reason}" for row in rows for g in row.grades
                                if not g.passed and g.reason)
            note += cell_flags(rows, (index, variant) in flaky)
            title = f' title="{escape(redact_text(reasons, known)[:300])}"' if reasons else ""
            cells.append(f'<td style="white-space:nowrap"{title}>{escape(marks(rows))}'
                         f"{escape(score)}{note}{trail_html(rows, known)}</td>")
        shown = _short(redact_text(text_of(first.input), known))
        body.append(f'<tr><td style="overflow-wrap:anywhere;min-width:8em;text-align:left">'
                    f"{escape(shown)}</td>{''.join(cells)}</tr>")
    more = len(cases) - SHOWN_CASES
    tail = f"<p>… {more:,} more cases (to_pandas() has them all)</p>" if more > 0 else ""
    return (f'<div class="fragola-evaluation" style="overflow-x:auto;max-width:100%">'
            f"<p><b>Evaluation</b> · {escape(evaluation.overview(summary))}</p>"
            + ("" if diff is None else f"<p>against the baseline: {escape(diff.overview())}</p>")
            + verdicts_html(evaluation)
            + '<table style="table-layout:auto">'
            f'<thead><tr><th style="text-align:left">case</th>{head}</tr>'
            f"<tr><td>pass rate</td>{''.join(lines)}</tr>"
            f"<tr><td>95% interval</td>{''.join(intervals)}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{tail}</div>")


def interval_text(line: dict[str, Any]) -> str:
    """``"49–94% of 10 cases"``: a summary line's pass-rate interval."""
    ci = line["pass_rate_ci"]
    if ci is None:
        return "–"
    return f"{percent(ci[0])}–{percent(ci[1])}".replace("%–", "–") + (
        f" of {line['cases']} case{'s' if line['cases'] != 1 else ''}")


def cell_flags(rows: list[EvalRow], flaky: bool) -> str:
    """The marks of a flaky cell (its repeats disagree) and of its labelled rows."""
    out = ' <span class="fx-eval-flaky" title="its repeats disagree">≈ flaky</span>' if flaky \
        else ""
    labels = [row.label for row in rows if row.label is not None]
    if labels:
        said = " ".join("✓" if label.passed else "✗" for label in labels)
        out += f' <span class="fx-eval-label" title="labelled by hand">labelled {said}</span>'
    return out


def verdicts_html(evaluation: Evaluation) -> str:
    """Each verdict (``Evaluation.verdicts``) as a line of text, escaped."""
    from fragola_nb.experiments.evaluate.versus import verdict_texts

    said = verdict_texts(evaluation)
    return ("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in said) + "</ul>"
            if said else "")


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
