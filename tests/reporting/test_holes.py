"""The gate that tells label holes from evidence: a better system scored against a pool of the worse one is never
failed, a truly worse system with holes still is, and ``--require-judged`` fails the holes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import evalkit
from evalkit.app.cli import main
from evalkit.reporting.build import build_report
from evalkit.reporting.comparison import compare_many, compare_reports
from evalkit.reporting.gates import GateFailure
from evalkit.reporting.holes import DEFAULT_MAX_UNJUDGED_GAP, Retest, UnjudgedShare, condensed_name
from evalkit.reporting.regression import check_regressions, find_regressions
from evalkit.reporting.report import Report, parse_report, report_json
from evalkit.reporting.run_files import trec_runs
from evalkit.runs.evaluation import Evaluation


def _rankings(evaluation: Evaluation, system: str) -> dict[str, list[tuple[str, float]]]:
    """The system's TREC run as ``{query: [(doc, score), ...]}`` in rank order."""
    out: dict[str, list[tuple[str, float]]] = {}
    for line in trec_runs(evaluation)[f"{system}.trec"].decode().splitlines():
        query, _, doc, _, score, _ = line.split()
        out.setdefault(query, []).append((doc, float(score)))
    return out


def _pool_qrels(evaluation: Evaluation, system: str, depth: int = 10) -> str:
    """Judgments as a team labelling `system` makes them: its top `depth` judged, relevant or not; nothing else."""
    grades = {q.query_id: {j.chunk_id: j.grade for j in q.judgments} for q in evaluation.fixture.queries}
    lines = [
        f"{query} 0 {doc} {grades[query].get(doc, 0)}"
        for query, ranking in sorted(_rankings(evaluation, system).items())
        for doc, _ in ranking[:depth]
    ]
    return "\n".join(lines) + "\n"


def _report(qrels: Path, run: dict[str, dict[str, float]], languages: dict[str, str]) -> Report:
    return evalkit.score(str(qrels), {"sys": run}, languages=languages).to_report()


def _as_run(rankings: dict[str, list[tuple[str, float]]]) -> dict[str, dict[str, float]]:
    return {q: dict(ranking) for q, ranking in rankings.items()}


def _worse_head(evaluation: Evaluation, pooled: tuple[Path, dict[str, str]]) -> tuple[Report, Report]:
    """lexical (the base) and a head that loses the base's relevant chunks on every query and on half of them fills
    its top 10 with chunks nobody judged."""
    qrels, languages = pooled
    base_rankings = _rankings(evaluation, "lexical")
    grades = {q.query_id: {j.chunk_id for j in q.judgments} for q in evaluation.fixture.queries}
    head: dict[str, dict[str, float]] = {}
    for i, (query, ranking) in enumerate(sorted(base_rankings.items())):
        kept = [(d, s) for d, s in ranking if d not in grades[query]]  # its judged misses, no relevant chunk
        filler = [(f"unjudged-{query}-{j}", 0.5 - j / 100) for j in range(10)] if i % 2 else []
        head[query] = dict((kept + filler)[:10])
    return _report(qrels, _as_run(base_rankings), languages), _report(qrels, head, languages)


@pytest.fixture(scope="module")
def pooled(synthetic_evaluation: Evaluation, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    folder = tmp_path_factory.mktemp("holes")
    qrels = folder / "pool.txt"
    qrels.write_text(_pool_qrels(synthetic_evaluation, "lexical"))
    return qrels, {q.query_id: q.language for q in synthetic_evaluation.fixture.queries}


@pytest.fixture(scope="module")
def better_head(synthetic_evaluation: Evaluation, pooled: tuple[Path, dict[str, str]]) -> tuple[Report, Report]:
    """lexical (the base, whose top 10 the judgments are) and hybrid-rerank (the better head) scored on the pool."""
    qrels, languages = pooled
    base = _report(qrels, _as_run(_rankings(synthetic_evaluation, "lexical")), languages)
    return base, _report(qrels, _as_run(_rankings(synthetic_evaluation, "hybrid-rerank")), languages)


def test_a_better_system_scored_against_the_pool_of_the_worse_one_is_not_failed(
    better_head: tuple[Report, Report],
) -> None:
    comparison = compare_reports(*better_head)
    # Without the holes check the plain test fails the better system, as it did before the check.
    plain = [r for r in comparison.gate_rows() if r.p_holm < 0.05 and r.drop > 0.01]
    assert plain, "the scenario no longer shows the trap"
    verdict = find_regressions(comparison)
    assert verdict.passed, verdict.describe()
    # Exactly the rows the plain test fails are retested and found to be holes.
    assert {row.label() for row, _ in verdict.holes} == {r.label() for r in plain}
    _, retest = verdict.holes[0]
    assert retest.head.share > retest.base.share + DEFAULT_MAX_UNJUDGED_GAP
    assert retest.base.share == 0.0  # the base is its own pool
    text = verdict.describe()
    assert "holes  sys" in text and "unjudged chunk(s)" in text and "evalkit pool" in text
    assert f"{retest.head.unjudged} unjudged chunk(s)" in text
    check_regressions(verdict)  # no exception: not a regression
    with pytest.raises(GateFailure, match="unjudged share gap"):
        check_regressions(verdict, require_judged=True)


def test_a_truly_worse_system_with_holes_still_fails(
    synthetic_evaluation: Evaluation, pooled: tuple[Path, dict[str, str]]
) -> None:
    """The head loses the base's relevant chunks on every query, and on half of them fills its top 10 with chunks
    nobody judged: the judged half is evidence, and the gate fails it."""
    verdict = find_regressions(compare_reports(*_worse_head(synthetic_evaluation, pooled)))
    assert not verdict.passed, verdict.describe()
    assert any(row.measure == "ndcg@10" and row.slice == "all" for row in verdict.regressions)
    assert verdict.retested, "the head is more unjudged than the base: the drop must have been tested again"
    assert "a regression, not holes" in verdict.describe()
    with pytest.raises(GateFailure, match="ndcg@10"):
        check_regressions(verdict)


def test_the_gap_bound_decides_when_the_retest_runs(better_head: tuple[Report, Report]) -> None:
    comparison = compare_reports(*better_head)
    everything = find_regressions(comparison, max_unjudged_gap=1.0)  # no gap exceeds 1: the plain test alone
    assert not everything.holes and not everything.passed
    with pytest.raises(ValueError, match="max_unjudged_gap"):
        find_regressions(comparison, max_unjudged_gap=1.5)


def test_several_reports_are_checked_for_holes_against_the_first(
    synthetic_evaluation: Evaluation, pooled: tuple[Path, dict[str, str]]
) -> None:
    qrels, languages = pooled
    reports = [
        _report(qrels, _as_run(_rankings(synthetic_evaluation, name)), languages)
        for name in ("lexical", "hybrid", "hybrid-rerank")
    ]
    verdict = find_regressions(compare_many(reports, ["lexical", "hybrid", "hybrid-rerank"]))
    assert verdict.passed, verdict.describe()
    # Only rows the plain test fails are retested, over the whole family of pairs (Holm over 18 rows here).
    assert all(r.p_holm < 0.05 and r.drop > 0.01 for r, _ in verdict.holes)


def test_judgments_of_relevant_chunks_alone_are_not_read_as_holes(synthetic_evaluation: Evaluation) -> None:
    """The fixture judges relevant chunks only: every other chunk is unjudged by design, so a worse system is more
    unjudged because it is worse, and the check must not excuse it."""
    report = build_report(synthetic_evaluation)
    unjudged = report.ablations["lexical"].unjudged
    assert unjudged is not None and not any(unjudged.pooled)
    comparison = compare_reports(report, report)
    assert comparison.unjudged == ()


def test_misses_on_queries_judged_for_relevant_chunks_alone_stay_misses_in_the_retest(
    synthetic_evaluation: Evaluation, tmp_path: Path
) -> None:
    """Half the queries are pooled (lexical's top 10 judged, relevant or not), half judged for their relevant chunks
    alone. The head fills its top 10 with unjudged chunks on the pooled half (holes) and loses the relevant chunk on
    the other half (misses): the retest gives the benefit of the doubt on the pooled half only, so the misses keep
    the drop a regression instead of being excused as holes."""
    queries = sorted(q.query_id for q in synthetic_evaluation.fixture.queries)
    pooled_half = set(queries[::2])
    relevant = {q.query_id: {j.chunk_id: j.grade for j in q.judgments} for q in synthetic_evaluation.fixture.queries}
    pool_lines = [
        line for line in _pool_qrels(synthetic_evaluation, "lexical").splitlines() if line.split()[0] in pooled_half
    ]
    rest = [f"{q} 0 {d} {g}" for q in queries if q not in pooled_half for d, g in relevant[q].items() if g >= 1]
    qrels = tmp_path / "mixed.txt"
    qrels.write_text("\n".join(pool_lines + rest) + "\n")
    languages = {q.query_id: q.language for q in synthetic_evaluation.fixture.queries}
    base_rankings = _rankings(synthetic_evaluation, "lexical")
    head: dict[str, dict[str, float]] = {}
    for query, ranking in sorted(base_rankings.items()):
        if query in pooled_half:
            head[query] = {f"unjudged-{query}-{j}": 0.5 - j / 100 for j in range(10)}
        else:
            head[query] = dict([(d, s) for d, s in ranking if relevant[query].get(d, 0) < 1][:10])
    base, worse = _report(qrels, _as_run(base_rankings), languages), _report(qrels, head, languages)
    verdict = find_regressions(compare_reports(base, worse))
    assert not verdict.passed
    assert {(r.measure, r.slice) for r in verdict.regressions} >= {("ndcg@10", "all"), ("recall@10", "all")}
    tests = {(t.measure, t.slice): t for t in compare_reports(base, worse).judged_tests}
    assert 0 < tests[("ndcg@10", "all")].doubtful <= len(pooled_half)


def test_condensed_names() -> None:
    assert condensed_name("ndcg@10") == "condensed_ndcg@10"
    assert condensed_name("recall@5") == "condensed_recall@5"
    assert condensed_name("ndcg_cut_10") is None  # trec_eval's names have no condensed form here
    assert condensed_name("not a measure") is None


def test_compare_cli_reports_holes_and_require_judged_fails_them(
    better_head: tuple[Report, Report],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, report in zip(("base.json", "head.json"), better_head, strict=True):
        (tmp_path / name).write_bytes(report_json(report))
    assert main(["compare", "base.json", "head.json", "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert "holes  sys recall@10 [all]" in out and "evalkit pool" in out
    assert main(["compare", "base.json", "head.json", "--require-judged"]) == 1
    assert "unjudged share gap" in capsys.readouterr().err
    assert main(["compare", "base.json", "head.json", "--fail-on-regression", "--max-unjudged-gap", "1"]) == 1
    assert main(["compare", "base.json", "head.json", "--max-unjudged-gap", "2", "--fail-on-regression"]) == 2


def test_a_drop_the_plain_test_does_not_call_a_regression_is_not_called_holes(
    better_head: tuple[Report, Report],
) -> None:
    verdict = find_regressions(compare_reports(*better_head))
    held = {row.label() for row, _ in verdict.holes}
    assert "sys ndcg@10 [en]" not in held  # dropped, but not significantly: no evidence, and nothing to excuse
    assert any(row.label() == "sys ndcg@10 [en]" for row in verdict.not_significant + verdict.underpowered)


def test_companions_must_be_condensed_measures(better_head: tuple[Report, Report]) -> None:
    """A hand-edited companions list naming a plain measure would hide that measure from the gate."""
    data = json.loads(report_json(better_head[1]))
    data["companions"] = ["ndcg@10"]
    with pytest.raises(ValueError, match="not a condensed-list measure"):
        parse_report(json.dumps(data))


def test_a_report_without_unjudged_counts_is_named_in_the_notes(better_head: tuple[Report, Report]) -> None:
    base, head = better_head
    old = base.model_copy(
        update={"ablations": {a: r.model_copy(update={"unjudged": None}) for a, r in base.ablations.items()}}
    )
    comparison = compare_reports(old, head)
    assert any(note.startswith("base report carries no unjudged counts") for note in comparison.notes)
    assert not any("unjudged counts" in note for note in compare_reports(base, head).notes)


def test_a_holes_line_states_the_rows_own_holm_p_and_the_retests_apart(better_head: tuple[Report, Report]) -> None:
    """The row's Holm p is the table's and the JSON's; the retest's (over the family with its judged-only p in place)
    is said apart, labelled: a holes line once printed the retest's as the row's."""
    comparison = compare_reports(*better_head)
    own = {row.label(): row.p_holm for row in comparison.gate_rows()}
    verdict = find_regressions(comparison)
    assert verdict.holes
    lines = verdict.describe().splitlines()
    for row, retest in verdict.holes:
        assert retest.condensed_p_holm is not None and retest.condensed_p_holm != own[row.label()]
        assert row.p_holm == own[row.label()]
        line = next(line for line in lines if line.startswith(f"holes  {row.label()}:"))
        assert f"Holm p = {own[row.label()]:.4g};" in line
        assert f"the retest's Holm p = {retest.condensed_p_holm:.4g}" in line
    rows = verdict.regressions + verdict.not_significant + verdict.within_tolerance + verdict.underpowered
    assert all(row.p_holm == own[row.label()] for row in rows)
    for label, decided in verdict.family_p_holm.items():
        assert f"{label}: " in verdict.describe() and f"gate's Holm p = {decided:.4g}" in verdict.describe()


def _share(system: str, share: float) -> UnjudgedShare:
    return UnjudgedShare(system=system, ablation="sys", slice="all", k=10, share=share, unjudged=7, queries=4)


def test_the_judged_only_figure_is_a_difference_as_the_rows_is() -> None:
    """head - base, as the row's difference, whatever the retest calls a drop; and a zero is +0.0000."""
    worse = Retest(_share("base", 0.0), _share("head", 0.2), "condensed_ndcg@10", -0.3357, 0.0004)
    assert "the difference is -0.3357 with the retest's Holm p = 0.0004" in worse.judged_only()
    assert worse.survives(0.05, 0.01)
    tied = Retest(_share("base", 0.0), _share("head", 0.2), "condensed_ndcg@10", -0.0, 1.0)
    assert "the difference is +0.0000 with the retest's Holm p = 1" in tied.judged_only()
    assert not tied.survives(0.05, 0.01)


def test_a_failed_lines_differences_share_one_sign(
    synthetic_evaluation: Evaluation, pooled: tuple[Path, dict[str, str]]
) -> None:
    """The head loses the base's relevant chunks: both the row's and the judged-only difference are negative."""
    verdict = find_regressions(compare_reports(*_worse_head(synthetic_evaluation, pooled)))
    assert verdict.retested
    for row, _ in verdict.retested:
        line = next(line for line in verdict.describe().splitlines() if line.startswith(f"FAIL  {row.label()}:"))
        assert line.startswith(f"FAIL  {row.label()}: difference -")
        assert "the difference is -" in line and "the drop is" not in line


def test_the_pool_command_fits_how_the_reports_were_scored(better_head: tuple[Report, Report]) -> None:
    """Reports scored against qrels are pooled with --qrels; reports scored against a fixture (they carry its
    corpus hash) with --fixture, which has the judgments."""
    qrels_verdict = find_regressions(compare_reports(*better_head))
    assert "`evalkit pool --qrels FILE --run BASE --run HEAD --depth 10`" in qrels_verdict.describe()
    with_fixture = [report.model_copy(update={"corpus_sha256": "c" * 64}) for report in better_head]
    verdict = find_regressions(compare_reports(*with_fixture))
    assert verdict.holes and "--qrels" not in verdict.describe()
    assert "`evalkit pool --fixture DIR --run BASE --run HEAD --depth 10`" in verdict.describe()
    many = find_regressions(compare_many(with_fixture, ["lexical", "hybrid-rerank"]))
    assert many.holes and "`evalkit pool --fixture DIR --run BASE" in many.describe()
    mixed = find_regressions(compare_reports(better_head[0], with_fixture[1]))
    assert "`evalkit pool --qrels FILE" in mixed.describe()  # the qrels that scored one side hold the judgments


def test_a_gated_measure_of_another_depth_than_the_unjudged_counts_is_not_called_holes(
    synthetic_evaluation: Evaluation, pooled: tuple[Path, dict[str, str]]
) -> None:
    """Scored with recall@100 too, the reports count unjudged chunks in the top 100: the head's unjudged ranks
    11-100 must not excuse a loss in the top 10 that ndcg@10 reads. Its drop stays a regression, saying why."""
    qrels, languages = pooled
    base_rankings = _rankings(synthetic_evaluation, "lexical")
    grades = {q.query_id: {j.chunk_id for j in q.judgments} for q in synthetic_evaluation.fixture.queries}
    head = {  # its top 10: the base's judged misses only; below them, chunks nobody judged
        query: dict(
            [(d, s) for d, s in ranking if d not in grades[query]][:10] + [(f"u-{query}-{j}", -j) for j in range(90)]
        )
        for query, ranking in sorted(base_rankings.items())
    }
    measures = ["recall@10", "ndcg@10", "recall@100"]
    base = evalkit.score(str(qrels), {"sys": _as_run(base_rankings)}, measures=measures, languages=languages)
    worse = evalkit.score(str(qrels), {"sys": head}, measures=measures, languages=languages)
    verdict = find_regressions(compare_reports(base.to_report(), worse.to_report()))
    assert not verdict.passed and not verdict.holes, verdict.describe()
    assert "unjudged counts are of the top 100, while ndcg@10 reads the top 10" in verdict.describe()


def test_judged_shares_at_any_depth_are_not_compared_as_results(tmp_path: Path) -> None:
    """judged@5 and unj@5 asked for beside the gated measures describe the judgments, not the system: a wholly
    unjudged head would "win" every query on unj@5."""
    qrels = {f"q{i:02d}": {f"d{i}": 1, f"n{i}": 0} for i in range(20)}
    base = {q: {d: 1.0 for d in judged} for q, judged in qrels.items()}
    head = {q: {f"u{q}": 1.0} for q in qrels}
    measures = ["ndcg@10", "recall@10", "judged@5", "unj@5"]
    reports = [evalkit.score(qrels, {"sys": run}, measures=measures).to_report() for run in (base, head)]
    compared_measures = {row.measure for row in compare_reports(*reports).rows}
    assert compared_measures == {"ndcg@10", "recall@10"}


def test_the_depth_of_either_sides_unjudged_counts_decides(
    synthetic_evaluation: Evaluation, pooled: tuple[Path, dict[str, str]]
) -> None:
    """Only the base scored with recall@100: its counts are of its top 100, the head's of its top 10; a drop of the
    worse head must not pass as holes on the base's deeper, better judged share."""
    qrels, languages = pooled
    base_rankings = _rankings(synthetic_evaluation, "lexical")
    _, head = _worse_head(synthetic_evaluation, pooled)
    deeper = evalkit.score(
        str(qrels),
        {"sys": _as_run(base_rankings)},
        measures=["recall@10", "ndcg@10", "recall@100"],
        languages=languages,
    ).to_report()
    verdict = find_regressions(compare_reports(deeper, head))
    assert not verdict.passed and not verdict.holes, verdict.describe()
    assert "the base's top 100 and the head's top 10" in verdict.describe()
