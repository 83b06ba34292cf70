"""Comparisons and batches as pages of ``export_html``: the data the page's script draws.

``fragola_nb.sessions.htmlexport`` writes the page and knows an agent's tree; the kinds of this
layer are registered with it when ``fragola_nb.experiments`` is imported (a ``Comparison`` or
a ``BatchResult`` cannot exist before that), so sessions never import experiments.
"""

from __future__ import annotations

from typing import Any

from fragola_nb.base.render import text_of, transcript_text
from fragola_nb.experiments.batch.result import BatchResult
from fragola_nb.experiments.compare.comparison import Comparison
from fragola_nb.sessions.export import subtitle
from fragola_nb.sessions.htmlexport import Clean, Data, register_kind

__all__ = ["batch_data", "comparison_data"]


def comparison_data(comparison: Comparison, clean: Clean) -> Data:
    variants = []
    shared: list[dict[str, Any]] = []
    for run, row in zip(comparison.runs.values(), comparison.table(), strict=True):
        fork = run.fork
        messages = fork.state.messages
        if not shared:
            shared = messages[:fork.fork_point]
        variants.append({
            "name": clean.text(row["variant"]), "status": clean.text(row["status"]),
            "answer": clean.text(row["answer"]) if row["answer"] is not None else None,
            "calls": [clean.text(c) for c in row["tool_calls"]],
            "tokens": row["tokens"], "seconds": row["seconds"],
            "error": clean.text(row["error"]) if row["error"] else None,
            "about": clean.text(subtitle(fork)),
            "messages": clean.messages(messages[fork.fork_point:]),
        })
    agent = comparison.agent
    return {"kind": "comparison", "title": clean.text(f"{agent.name}: comparison"),
            "message": clean.text(text_of(comparison.message)),
            "shared": clean.messages(shared), "variants": variants}


def batch_data(result: BatchResult, clean: Clean) -> Data:
    rows = []
    for row in result:
        given = row.input if isinstance(row.input, str) else transcript_text(row.input)
        fork = row.fork
        rows.append({
            "index": row.index, "status": clean.text(row.status), "input": clean.text(given),
            "answer": clean.text(row.answer) if row.answer is not None else None,
            "error": clean.text(row.error) if row.error is not None else None,
            "tokens": row.tokens, "seconds": row.seconds, "resumed": row.resumed,
            "messages": clean.messages(fork.state.messages[fork.fork_point:])
            if fork is not None else None,
        })
    return {"kind": "batch", "title": f"batch of {len(result):,} inputs",
            "summary": clean.text(result.summary()), "rows": rows}


register_kind(Comparison, comparison_data,
              lambda comparison: [comparison.agent, *(r.fork for r in comparison.runs.values())])
register_kind(BatchResult, batch_data,
              lambda result: [row.fork for row in result if row.fork is not None])
