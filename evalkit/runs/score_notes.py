"""What ``evalkit score`` says beside its numbers: each run's counts (the report's ``system.counts``) and the notes on
what shaped the scores or was left uncounted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from evalkit.data.qrels import Qrels
from evalkit.data.schema import Language
from evalkit.measures.core import RunScores

__all__ = ["coverage_notes", "run_counts", "scoring_notes"]


def run_counts(run: RunScores) -> dict[str, int]:
    """The join's counts of one run, as a report records them (empty when not counted)."""
    if run.counts is None:
        return {}
    c = run.counts
    return {
        "lines": c.lines,
        "duplicates": c.duplicates,
        "unjudged_queries": c.unjudged_queries,
        "missing_queries": c.missing_queries,
        "all_ties": c.all_ties,
    }


def scoring_notes(scores: Sequence[RunScores], dropped: Sequence[str], missing: str) -> list[str]:
    """The measures left out for want of spans, and each run's counts in words."""
    notes = (
        [
            f"{', '.join(dropped)} left out: context measures need answer spans, which only a fixture gives "
            "(evalkit score --fixture)"
        ]
        if dropped
        else []
    )
    for run in scores:
        c = run.counts
        if c is None:
            continue
        action = "scored 0" if missing == "zero" else "left out"
        notes.append(
            f"{run.name}: {c.lines} line(s); {c.missing_queries} judged query(ies) missing from the run ({action}); "
            f"{c.unjudged_queries} run query(ies) without judgments ignored; {c.duplicates} duplicate line(s) "
            f"(best-placed kept); {c.all_ties} query(ies) whose results all tie (ordered by the tie policy alone)"
        )
    return notes


def coverage_notes(
    judged: Qrels, scores: Sequence[RunScores], query_languages: Mapping[str, Language], languages: object
) -> list[str]:
    """Notes on what was left uncounted: no query evaluated at all; judged queries without a language, and topics
    naming queries that are not judged."""
    notes = []
    evaluated = np.logical_and.reduce([s.evaluated for s in scores])
    if not evaluated.any():
        notes.append("no judged query is named by every run: nothing was scored (see --missing)")
    if languages is not None:
        ids = judged.queries.to_pylist()
        without = sum(1 for q in ids if q not in query_languages)
        unjudged = len(set(query_languages) - set(ids))
        if without or unjudged:
            notes.append(
                f"topics: {without} judged query(ies) without a language (in the 'all' slice only); "
                f"{unjudged} topic(s) naming a query the qrels do not judge (ignored)"
            )
    return notes
