"""What a comparison says differs between two reports besides their results."""

from __future__ import annotations

import pytest

import evalkit
from evalkit.reporting.comparison import compare_reports
from evalkit.reporting.report import Report

QRELS = {f"q{i}": {f"d{i}": 1, f"n{i}": 0} for i in range(8)}
LANGUAGES = {f"q{i}": "en" if i % 2 else "zh" for i in range(8)}


def _run(nudge: float = 0.0) -> dict[str, dict[str, float]]:
    """Each query's relevant chunk first on even queries, second on odd ones; `nudge` moves one score only."""
    run = {q: {f"d{i}": 1.0 if i % 2 == 0 else 0.5, f"n{i}": 0.7} for i, q in enumerate(QRELS)}
    run["q0"]["n0"] += nudge
    return {"sys": run}


def _score(run: dict[str, dict[str, dict[str, float]]], **options: object) -> Report:
    return evalkit.score(QRELS, run, languages=LANGUAGES, **options).to_report()  # type: ignore[arg-type]


def _definition_notes(base: Report, head: Report) -> list[str]:
    return [note for note in compare_reports(base, head).notes if "evaluation definition" in note]


def test_two_run_files_alone_are_no_other_evaluation_definition() -> None:
    """A score report's definition hash holds its run files' hashes: two runs compared always differ there, and
    that is not a change of retrieval settings, providers, corpus or metric version."""
    base, head = _score(_run()), _score(_run(nudge=0.01))
    assert base.evaluation_definition_hash != head.evaluation_definition_hash
    assert _definition_notes(base, head) == []


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"missing": "skip"}, "judged queries a run does not name (--missing): base zero, head skip"),
        ({"ties": "trec_eval"}, "tie policy (--ties): base evalkit, head trec_eval"),
        ({"measures": ["ndcg@10", "recall@10", "mrr@10"]}, "measures (base only: "),
    ],
)
def test_what_differs_in_a_score_definition_is_named(options: dict[str, object], said: str) -> None:
    base, head = _score(_run()), _score(_run(), **options)
    notes = _definition_notes(base, head)
    assert len(notes) == 1 and said in notes[0], notes
    assert "retrieval settings" not in notes[0]


def test_an_unrecorded_definition_change_is_still_said() -> None:
    base = _score(_run())
    head = base.model_copy(update={"evaluation_definition_hash": "a" * 64})
    (note,) = _definition_notes(base, head)
    assert "nothing the reports record of it does" in note


def test_judged_queries_a_skip_report_left_out_are_not_called_unjudged() -> None:
    """The head's run names half the queries and was scored with --missing skip: the other half is judged, and
    the note says why the head has no row for them."""
    run = {"sys": {q: ranking for q, ranking in _run()["sys"].items() if q in ("q0", "q1", "q2", "q3")}}
    base, head = _score(run), _score(run, missing="skip")
    (note,) = [note for note in compare_reports(base, head).notes if "left out of the comparison" in note]
    assert note.startswith("4 query(ies) of base are not in head (head was scored with --missing skip")
    assert "without judgments" not in note
