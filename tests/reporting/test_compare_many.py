"""More than two systems: every pair in one gated family, who cannot be told apart, paper tables; and the evidence
that the gate fails the README's rrf example and catches the tilted hybrid."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evalkit.app.cli import main
from evalkit.reporting.comparison import PairwiseComparison, compare_many, compare_reports
from evalkit.reporting.comparison_views import _letter, indistinguishable_groups, pairwise_frame, pairwise_table
from evalkit.reporting.regression import find_regressions
from evalkit.reporting.report import Report, parse_report

from ..app.test_cli_compare import reports, run_cli  # noqa: F401 (the reports fixture)
from ..conftest import SYNTHETIC_DIR


@pytest.fixture
def three(request: pytest.FixtureRequest) -> list[Report]:
    """base.json, same.json (a copy) and worse-zh.json (every Chinese answerable query lost its first-rank hit), as
    the ``reports`` fixture of tests/app/test_cli_compare.py writes them into the test's folder."""
    request.getfixturevalue("reports")
    return [parse_report(Path(n).read_bytes()) for n in ("base.json", "same.json", "worse-zh.json")]


def test_every_pair_is_in_one_gated_family(three: list[Report]) -> None:
    comparison = compare_many(three, ["base", "same", "worse"])
    pairs = list(dict.fromkeys((r.base_system, r.head_system) for r in comparison.rows))
    assert pairs == [("base", "same"), ("base", "worse"), ("same", "worse")]
    # 2 gated measures x 5 ablations x 3 slices per pair, 3 pairs, corrected together.
    assert comparison.family_size == 90 and comparison.exploratory_family_size == 270
    assert len(comparison.gate_rows()) == 60
    assert {(r.base_system, r.head_system) for r in comparison.gate_rows()} == {("base", "same"), ("base", "worse")}
    same = [r for r in comparison.rows if r.head_system == "same"]
    assert all(r.difference == 0.0 and r.p_value == 1.0 for r in same)
    assert PairwiseComparison.model_validate_json(json.dumps(comparison.model_dump(mode="json"))) == comparison


def test_two_reports_give_the_same_rows_as_compare_reports(three: list[Report]) -> None:
    pairwise = compare_many(three[::2], ["base", "worse"])
    single = compare_reports(three[0], three[2])
    strip = {"base_system", "head_system", "p_holm_two_sided"}
    assert [r.model_dump(exclude=strip) for r in pairwise.rows] == [r.model_dump() for r in single.rows]
    assert find_regressions(pairwise).describe().count("FAIL") == find_regressions(single).describe().count("FAIL")


def test_groups_say_who_cannot_be_told_apart(three: list[Report]) -> None:
    comparison = compare_many(three, ["base", "same", "worse"])
    groups = indistinguishable_groups(comparison)
    assert groups[("hybrid-rerank", "ndcg@10", "zh")] == [["base", "same"], ["worse"]]
    assert groups[("hybrid-rerank", "ndcg@10", "en")] == [["base", "same", "worse"]]
    assert groups[("hybrid-rerank", "recall@10", "zh")] == [["base", "same", "worse"]]
    markdown = pairwise_table(comparison, "markdown")
    assert "| a) base | " in markdown and "<sup>c</sup>" in markdown
    latex = pairwise_table(comparison, "latex")
    assert "\\begin{tabular}" in latex and "$^{c}$" in latex and "\\toprule" in latex
    assert pairwise_frame(comparison).shape[0] == len(comparison.rows)


@pytest.mark.parametrize(
    ("labels", "message"),
    [(["a", "b"], "one unique label each"), (["a", "a", "b"], "one unique label each")],
)
def test_bad_labels_are_refused(three: list[Report], labels: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compare_many(three, labels)


def test_cli_compares_three_reports_and_gates_against_the_first(
    three: list[Report], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "compare", "base.json", "same.json", "worse-zh.json", "--fail-on-regression", "--output", "c.json"
    )
    assert code == 1
    assert "worse-zh vs base: hybrid-rerank ndcg@10 [zh] difference" in err
    assert "worse-zh vs same" not in err, "the gate reads the pairs against the first report only"
    assert "3 systems, every later one against every earlier one: 90 gated comparisons" in out
    assert "hybrid-rerank ndcg@10 [zh]: {base, same}" in out
    written = PairwiseComparison.model_validate_json(Path("c.json").read_bytes())
    assert [s.label for s in written.systems] == ["base", "same", "worse-zh"]


def test_cli_labels_and_paper_formats(three: list[Report], capsys: pytest.CaptureFixture[str]) -> None:
    labels = ("--label", "BM25", "--label", "copy", "--label", "worse")
    code, out, _ = run_cli(
        capsys, "compare", "base.json", "same.json", "worse-zh.json", *labels, "--format", "markdown"
    )
    assert code == 0 and out.startswith("**lexical**") and "| a) BM25 |" in out and "PASS" not in out
    code, out, _ = run_cli(capsys, "compare", "base.json", "worse-zh.json", "--format", "latex")
    assert code == 0 and "a) base" in out and "b) worse-zh" in out and "\\end{table}" in out
    code, _, err = run_cli(capsys, "compare", "base.json", "same.json", "worse-zh.json", "--label", "x")
    assert code == 2 and "give --label once per report" in err
    code, _, err = run_cli(capsys, "compare", "base.json")
    assert code == 2 and "two or more reports" in err


def test_a_markdown_table_keeps_its_columns_whatever_the_labels_hold(three: list[Report]) -> None:
    """A label's ``|`` would end its cell and a line break the row; ``*`` and ``_`` would set it in italics. They
    are escaped, as the LaTeX table escapes ``&`` and ``_``."""
    comparison = compare_many(three, ["a|b", "two\nlines", "*x_y*"])
    table = pairwise_table(comparison, "markdown")
    rows = [line for line in table.splitlines() if line.startswith("|")]
    cells = {len(re.findall(r"(?<!\\)\|", line)) for line in rows}  # the pipes that are not escaped
    assert len(rows) == 5 * len(comparison.ablations) and len(cells) == 1, table
    assert "| a) a\\|b |" in table and "| b) two lines |" in table and "| c) \\*x\\_y\\* |" in table


def test_a_markdown_label_shows_references_and_links_as_written(three: list[Report]) -> None:
    """``&lt;`` would render as ``<`` and ``[v2](http://x)`` as a link: ``&``, ``[`` and ``]`` are escaped."""
    table = pairwise_table(compare_many(three, ["bm25 &lt;t&gt;", "dense [v2](http://x)", "a&#124;b"]), "markdown")
    assert "| a) bm25 \\&lt;t\\&gt; |" in table and "| b) dense \\[v2\\](http://x) |" in table
    assert "| c) a\\&#124;b |" in table


def test_marks_past_z_are_two_letters_separated() -> None:
    """System 27 is aa, not 27: the marks of two systems past z stay apart ("2728" read as 2, 7, 2, 8)."""
    assert [_letter(i) for i in (0, 25, 26, 27, 51, 52, 701, 702)] == ["a", "z", "aa", "ab", "az", "ba", "zz", "aaa"]


def test_a_latex_table_prints_a_labels_backslash_tilde_and_caret(three: list[Report]) -> None:
    """A backslash would start a command, ``~`` is a space and ``^`` a superscript outside math: text commands."""
    table = pairwise_table(compare_many(three, ["a\\b", "c~d", "e^f_g"]), "latex")
    assert "a) a\\textbackslash{}b &" in table and "b) c\\textasciitilde{}d &" in table
    assert "c) e\\textasciicircum{}f\\_g &" in table


def test_two_reports_print_what_they_printed(three: list[Report], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "compare", "base.json", "worse-zh.json", "--label", "a", "--label", "b")
    assert code == 0 and out.startswith("ablation ") and "FAIL  hybrid-rerank ndcg@10 [zh]" in out
    assert " vs " not in out


# --- evidence: the gate on real runs of the synthetic fixture ------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], output: str, ablations: str, settings: dict[str, object] | None) -> None:
    argv = ["run", "--fixture", str(SYNTHETIC_DIR), "--ablations", ablations, "--runs", "1", "--no-gates"]
    if settings is not None:
        Path(f"{output}.settings.json").write_text(json.dumps(settings), encoding="utf-8")
        argv += ["--settings", f"{output}.settings.json"]
    assert main([*argv, "--output", output]) == 0
    capsys.readouterr()


def test_readme_rrf_example_still_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """README, "How to read a comparison": hybrid with reciprocal-rank fusion against the default fusion."""
    monkeypatch.chdir(tmp_path)
    _run(capsys, "base.json", "hybrid", None)
    _run(capsys, "rrf.json", "hybrid", {"fusion": "rrf"})
    code, out, err = run_cli(capsys, "compare", "base.json", "rrf.json", "--fail-on-regression")
    assert code == 1
    assert "FAIL  hybrid ndcg@10 [zh]: difference -0.1209" in out
    assert "hybrid ndcg@10 [all] difference = -0.0971" in err


def test_tilted_hybrid_is_caught_over_all_queries_and_underpowered_per_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hybrid with its lexical side zeroed and top_k 3: recall@10 drops by 0.077 over all 69 queries."""
    monkeypatch.chdir(tmp_path)
    _run(capsys, "base.json", "lexical,hybrid", None)
    _run(capsys, "tilted.json", "lexical,hybrid", {"lexical_weight": 0.0, "top_k": 3})
    code, out, _ = run_cli(capsys, "compare", "base.json", "tilted.json")
    assert code == 0, "without a gate flag the verdict is printed only"
    # `all` is gated beside each language: the drop over all queries is significant in the family of 12.
    assert "FAIL  hybrid recall@10 [all]: difference -0.0773" in out
    # Each language alone (34 and 35 queries, 4 discordant) could not have seen it.
    assert "underpowered  hybrid recall@10 [en]: MDE 0.1251 > max drop 0.01; 4 discordant queries" in out
    assert "underpowered  hybrid recall@10 [zh]: MDE 0.1511 > max drop 0.01" in out
    assert "9 of 12 gated rows underpowered" in out
    code, _, err = run_cli(capsys, "compare", "base.json", "tilted.json", "--require-power")
    assert code == 1
    assert "hybrid recall@10 [all] difference = -0.0773" in err
    assert "hybrid recall@10 [en] minimum detectable effect = 0.1251" in err and "underpowered" in err
