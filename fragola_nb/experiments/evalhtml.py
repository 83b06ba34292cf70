"""An ``Evaluation`` as static, escaped HTML: the summary per variant, then the matrix (cases
down, variants across, a pass/fail mark per repeat and the mean score in each cell). What a
notebook saved without its widgets shows, and the ``_repr_html_`` outside a kernel. Model and
grader text is escaped, never HTML."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import escape, text_of
from fragola_nb.core.usage import format_cost
from fragola_nb.experiments.evalrows import flaky_cells

if TYPE_CHECKING:
    from fragola_nb.experiments.evalrows import EvalRow
    from fragola_nb.experiments.evaluation import Evaluation

__all__ = ["evaluation_html", "marks"]

SHOWN_CASES = 50
"""Cases in the static matrix; the rest are counted (``to_pandas()`` has them all)."""

_MARK = {True: "✓", False: "✗", None: "·"}


def marks(rows: list[EvalRow]) -> str:
    """One mark per repeat: ✓ passed, ✗ failed, · not run (yet)."""
    return "".join(_MARK[row.passed] for row in rows)


def evaluation_html(evaluation: Evaluation) -> str:
    known = evaluation.known
    head = "".join(f"<th>{escape(name)}</th>" for name in evaluation.variants)
    lines, intervals = [], []
    for line in evaluation.summary():
        rate = line["pass_rate"]
        cost = line["cost"]
        lines.append(f"<td>{'–' if rate is None else f'{rate:.0%}'}"
                     f"{'' if cost is None else ' · ' + format_cost(cost)}</td>")
        intervals.append(f"<td>{escape(interval_text(line))}</td>")
    cases: dict[int, EvalRow] = {}
    for row in evaluation:
        cases.setdefault(row.case, row)
    body = []
    diff = evaluation.baseline
    flaky = flaky_cells(evaluation)
    for index, first in list(cases.items())[:SHOWN_CASES]:
        cells = []
        for variant in evaluation.variants:
            rows = evaluation.cell(index, variant)
            scores = [row.score for row in rows if row.score is not None]
            score = f" {sum(scores) / len(scores):.2f}" if scores else ""
            change = diff.of(index, variant) if diff is not None else None
            note = (f' <span class="fx-eval-change">{escape(change.change)}</span>'
                    if change is not None and change.change != "unchanged" else "")
            reasons = "; ".join(f"{g.name}: {g.reason}" for row in rows for g in row.grades
                                if not g.passed and g.reason)
            note += cell_flags(rows, (index, variant) in flaky)
            title = f' title="{escape(redact_text(reasons[:300], known))}"' if reasons else ""
            cells.append(f'<td style="white-space:nowrap"{title}>{escape(marks(rows))}'
                         f"{escape(score)}{note}</td>")
        shown = redact_text(_short(text_of(first.input)), known)
        body.append(f'<tr><td style="overflow-wrap:anywhere;min-width:8em;text-align:left">'
                    f"{escape(shown)}</td>{''.join(cells)}</tr>")
    more = len(cases) - SHOWN_CASES
    tail = f"<p>… {more:,} more cases (to_pandas() has them all)</p>" if more > 0 else ""
    return (f'<div class="fragola-evaluation" style="overflow-x:auto;max-width:100%">'
            f"<p><b>Evaluation</b> · {escape(evaluation.overview())}</p>{verdicts_html(evaluation)}"
            '<table style="table-layout:auto">'
            f'<thead><tr><th style="text-align:left">case</th>{head}</tr>'
            f"<tr><td>pass rate</td>{''.join(lines)}</tr>"
            f"<tr><td>95% interval</td>{''.join(intervals)}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{tail}</div>")


def interval_text(line: dict[str, Any]) -> str:
    """``"49–94% of 10 cases"``: a summary line's pass-rate interval."""
    ci = line["pass_rate_ci"]
    if ci is None:
        return "–"
    return f"{ci[0]:.0%}–{ci[1]:.0%}".replace("%–", "–") + (
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
    from fragola_nb.experiments.evalversus import verdict_texts

    said = verdict_texts(evaluation)
    return ("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in said) + "</ul>"
            if said else "")


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
