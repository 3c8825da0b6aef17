"""Tables and charts of a comparison, for the CLI and the notebooks: IDs and numbers only, deterministic figures.

:func:`format_comparison` is the plain-text table the CLI prints; :func:`comparison_frame` the same table for a
notebook; :func:`plot_forest` draws each paired difference with its interval per measure and language;
:func:`plot_per_query_differences` shows the per-query differences of one ablation and measure;
:func:`interval_frame` puts every aggregate of a report beside its interval.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from evalkit.data.schema import ALL_ABLATION_IDS, LANGUAGES, SLICES, model_json
from evalkit.reporting.comparison import Comparison, ComparisonRow, PairRow, PairwiseComparison
from evalkit.reporting.formatting import signed
from evalkit.reporting.per_query import ANSWERABLE_MEASURES, NO_ANSWER_MEASURES
from evalkit.reporting.regression import ungated_reason
from evalkit.reporting.report import Report

if TYPE_CHECKING:  # matplotlib is imported by the two plots only: `evalkit compare` never draws
    from matplotlib.figure import Figure

FOREST_MEASURES = ("recall@1", "recall@10", "mrr@10", "ndcg@10", "context_recall", "no_answer_fpr")


def format_comparison(comparison: Comparison) -> str:
    """A plain-text table, one row per ablation, measure and slice, then the families, marks and notes.

    ``p`` is two-sided; ``p worse`` is the one-sided p of "head is worse" the gate uses; ``Holm p`` is adjusted
    within the row's family (``gate``: gated, over one-sided p; ``expl``: exploratory, over two-sided p). ``MDE`` is
    a gated row's minimum detectable effect (``!`` after it: underpowered); ``*`` marks an interval and test that
    disagree, explained below the table.
    """
    confidence = f"{comparison.statistics.confidence:.0%} CI"
    header = (
        f"{'ablation':<18} {'measure':<17} {'slice':<5} {'n':>5} {'base':>7} {'head':>7} {'diff':>8} "
        f"{confidence:>19} {'p':>7} {'p worse':>7} {'Holm p':>7} {'family':<6} {'MDE':>8} {'W/T/L':>11}"
    )
    lines = [header, "-" * len(header)]
    marks = []
    for row in comparison.rows:
        interval = f"[{signed(row.ci_low, 3)}, {signed(row.ci_high, 3)}]" + ("*" if row.disagreement else " ")
        mde = "" if row.power is None else f"{row.power.mde:.3f}" + ("!" if row.power.underpowered else " ")
        lines.append(
            f"{row.ablation:<18} {row.measure:<17} {row.slice:<5} {row.queries:>5} {row.base_mean:>7.3f} "
            f"{row.head_mean:>7.3f} {signed(row.difference, 3):>8} {interval:>19} {row.p_value:>7.4f} "
            f"{row.p_one_sided:>7.4f} {row.p_holm:>7.4f} {'gate' if row.gated else 'expl':<6} {mde:>8} "
            f"{f'{row.wins}/{row.ties}/{row.losses}':>11}"
        )
        if row.disagreement:
            marks.append(f"* {row.label()}: {row.disagreement}")
    lines.append(
        f"{comparison.family_size} gated comparisons ({', '.join(comparison.gate_measures) or 'none'} x ablations x "
        f"{_gated_slices(comparison.rows)}): Holm over their one-sided p (p worse); "
        f"{comparison.exploratory_family_size} exploratory comparisons: Holm over their two-sided p. p is two-sided."
    )
    lines.append(
        f"MDE: drop a one-sided test at alpha {comparison.alpha:g} / {comparison.family_size} detects with 80% "
        f"power (normal approximation); ! marks an underpowered row (MDE > max drop {comparison.max_drop:g}, or "
        "too few discordant queries to reach that alpha)"
    )
    lines += marks
    lines += [f"note: {note}" for note in comparison.notes]
    if comparison.only_in_base or comparison.only_in_head:
        lines.append(
            f"not compared: base only {', '.join(comparison.only_in_base) or '-'}; "
            f"head only {', '.join(comparison.only_in_head) or '-'}"
        )
    return "\n".join(lines)


PairKey = tuple[str, str, str]
"""An ablation, gated measure and slice: one cell of the pairwise tables."""


def _better(row: PairRow, alpha: float) -> str | None:
    """The label of the system significantly better in this row (two-sided Holm over the gated family), or None."""
    if row.p_holm_two_sided >= alpha or row.difference == 0:
        return None
    return row.head_system if (row.difference > 0) == row.higher_is_better else row.base_system


def _cells(comparison: PairwiseComparison) -> dict[PairKey, list[PairRow]]:
    cells: dict[PairKey, list[PairRow]] = {}
    for row in comparison.rows:
        if row.gated:
            cells.setdefault((row.ablation, row.measure, row.slice), []).append(row)
    return cells


def indistinguishable_groups(
    comparison: PairwiseComparison, alpha: float | None = None
) -> dict[PairKey, list[list[str]]]:
    """Per ablation, gated measure and slice: the maximal groups of systems no two of which differ significantly.

    Two systems differ when the gated row of their pair has a two-sided Holm p (over the gated family of all pairs)
    below ``alpha`` (default: the comparison's). Groups are the maximal cliques of "cannot be told apart", in the
    systems' order; a system told apart from every other is a group of its own.
    """
    level = comparison.alpha if alpha is None else alpha
    order = [s.label for s in comparison.systems]
    groups: dict[PairKey, list[list[str]]] = {}
    for key, rows in _cells(comparison).items():
        apart = {frozenset((r.base_system, r.head_system)) for r in rows if _better(r, level) is not None}
        found: list[list[str]] = []
        for size in range(len(order), 0, -1):
            for group in itertools.combinations(order, size):
                if any(frozenset(p) in apart for p in itertools.combinations(group, 2)):
                    continue
                if not any(set(group) <= set(g) for g in found):
                    found.append(list(group))
        groups[key] = found
    return groups


def format_pairwise(comparison: PairwiseComparison) -> str:
    """The plain-text table of two or more systems: one row per pair, ablation, measure and slice, then the groups."""
    width = max(len(f"{r.head_system} vs {r.base_system}") for r in comparison.rows)
    head = f"{'pair':<{width}} {'ablation':<18} {'measure':<17} {'slice':<5} {'n':>5} {'base':>7} {'head':>7} "
    header = head + f"{'diff':>8} {'p':>7} {'p worse':>7} {'Holm p':>7} {'Holm p2':>7} {'family':<6} {'W/T/L':>11}"
    lines = [header, "-" * len(header)]
    for r in comparison.rows:
        lines.append(
            f"{f'{r.head_system} vs {r.base_system}':<{width}} {r.ablation:<18} {r.measure:<17} {r.slice:<5} "
            f"{r.queries:>5} {r.base_mean:>7.3f} {r.head_mean:>7.3f} {signed(r.difference, 3):>8} {r.p_value:>7.4f} "
            f"{r.p_one_sided:>7.4f} {r.p_holm:>7.4f} {r.p_holm_two_sided:>7.4f} {'gate' if r.gated else 'expl':<6} "
            f"{f'{r.wins}/{r.ties}/{r.losses}':>11}"
        )
    lines.append(
        f"{len(comparison.systems)} systems, every later one against every earlier one: {comparison.family_size} "
        f"gated comparisons ({', '.join(comparison.gate_measures) or 'none'} x pairs x ablations x "
        f"{_gated_slices(comparison.rows)}), "
        f"Holm over their one-sided p (Holm p, the gate's) and two-sided p (Holm p2, told apart?); "
        f"{comparison.exploratory_family_size} exploratory comparisons: Holm over their two-sided p"
    )
    lines.append(f"cannot be told apart (Holm p2 >= alpha {comparison.alpha:g}):")
    for (ablation, measure, slice_name), groups in indistinguishable_groups(comparison).items():
        shown = "; ".join("{" + ", ".join(g) + "}" for g in groups if len(g) > 1) or "every system told apart"
        lines.append(f"  {ablation} {measure} [{slice_name}]: {shown}")
    lines += [f"note: {note}" for note in comparison.notes]
    if comparison.not_compared:
        lines.append(f"not compared (not in every report): {', '.join(comparison.not_compared)}")
    return "\n".join(lines)


_LATEX_WORDS = {"\\": "\\textbackslash{}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}", "\n": " ", "\r": " "}
"""What a backslash does not escape in LaTeX, as the text commands that print it; a line break as a space (two
would end the paragraph, which a table cell cannot)."""


def _escape_latex(text: str) -> str:
    """`text` as literal text in LaTeX: ``& % $ # _ { }`` after a backslash, ``\\ ~ ^`` as text commands, a line
    break (which would end the table row's line) as a space."""
    return "".join(_LATEX_WORDS.get(c) or ("\\" + c if c in "&%$#_{}" else c) for c in text)


def _escape_markdown(text: str) -> str:
    """`text` as literal text in a markdown table cell: a ``|`` would end the cell, a line break the row, and
    ``* _ ` < > ~`` would start emphasis, code, HTML or strikethrough, ``&`` a character reference and ``[ ]`` a
    link; ``\\`` is escaped too, so that none of these escapes is undone."""
    return "".join("\\" + c if c in "\\|*_`<>~&[]" else " " if c in "\r\n" else c for c in text)


_ESCAPES = {"markdown": _escape_markdown, "latex": _escape_latex}
"""How each paper format writes text (a label, a measure, an ablation) as literal characters."""


def pairwise_table(comparison: PairwiseComparison, style: Literal["markdown", "latex"]) -> str:
    """A paper table per ablation: systems as rows, gated measure and slice as columns, each cell the mean.

    A superscript lists the letters of the systems this one is significantly better than (two-sided Holm over the
    gated family of all pairs, below the comparison's alpha), as in ranx's comparison table; the best mean is bold.
    LaTeX needs the booktabs package.
    """
    reason = ungated_reason(comparison)
    if reason is not None:  # its columns are the gated measures: a table without columns is no table
        raise ValueError(f"no paper table: {reason}")
    letters = {s.label: _letter(i) for i, s in enumerate(comparison.systems)}
    joined = "" if len(letters) <= 26 else ","  # past z the marks are aa, ab, ...: separated, they stay readable
    cells = _cells(comparison)
    tables = []
    for ablation in comparison.ablations:
        keys = [k for k in cells if k[0] == ablation]
        means = {
            (k, s): v
            for k in keys
            for r in cells[k]
            for s, v in ((r.base_system, r.base_mean), (r.head_system, r.head_mean))
        }
        wins: dict[tuple[PairKey, str], list[str]] = {}
        for k in keys:
            for r in cells[k]:
                winner = _better(r, comparison.alpha)
                if winner is not None:
                    loser = r.base_system if winner == r.head_system else r.head_system
                    wins.setdefault((k, winner), []).append(letters[loser])
        columns = [f"{m} [{s}]" for _, m, s in keys]
        body = []
        for label, letter in letters.items():
            row = [f"{letter}) {_ESCAPES[style](label)}"]
            for k in keys:
                values = [means[(k, s)] for s in letters]
                best = max(values) if all(r.higher_is_better for r in cells[k]) else min(values)
                text = f"{means[(k, label)]:.3f}"
                text = (
                    (f"**{text}**" if style == "markdown" else f"\\textbf{{{text}}}")
                    if means[(k, label)] == best
                    else text
                )
                marks = joined.join(sorted(wins.get((k, label), []), key=lambda mark: (len(mark), mark)))
                if marks:
                    text += f"<sup>{marks}</sup>" if style == "markdown" else f"$^{{{marks}}}$"
                row.append(text)
            body.append(row)
        tables.append(_render(ablation, columns, body, style))
    legend = (
        f"Superscripts: significantly better than the systems with those letters (paired sign-flip test, two-sided, "
        f"Holm over {comparison.family_size} gated comparisons, alpha {comparison.alpha:g}); bold: best mean."
    )
    return "\n\n".join([*tables, legend if style == "markdown" else f"% {legend}"]) + "\n"


def _letter(index: int) -> str:
    """A system's mark in a paper table: a to z, then aa, ab, ... (system 27 is aa)."""
    return chr(ord("a") + index) if index < 26 else _letter(index // 26 - 1) + chr(ord("a") + index % 26)


def _render(ablation: str, columns: list[str], body: list[list[str]], style: str) -> str:
    escaped = [_ESCAPES[style](c) for c in columns]
    if style == "markdown":
        head = [f"**{_escape_markdown(ablation)}**", "", "| system | " + " | ".join(escaped) + " |"]
        lines = [*head, "|---" * (len(columns) + 1) + "|"]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])
    return "\n".join(
        [
            "\\begin{table}[t]",
            "\\centering",
            f"\\caption{{{_escape_latex(ablation)}}}",
            "\\begin{tabular}{l" + "r" * len(columns) + "}",
            "\\toprule",
            "System & " + " & ".join(escaped) + " \\\\",
            "\\midrule",
            *(" & ".join(row) + " \\\\" for row in body),
            "\\bottomrule",
            "\\end{tabular}",
            "\\end{table}",
        ]
    )


def pairwise_frame(comparison: PairwiseComparison) -> pd.DataFrame:
    """The pairwise comparison for a notebook: one row per pair, ablation, measure and slice."""
    frame = comparison_frame(comparison.rows).reset_index()
    frame.insert(0, "head_system", [r.head_system for r in comparison.rows])
    frame.insert(0, "base_system", [r.base_system for r in comparison.rows])
    frame["holm_p_two_sided"] = [r.p_holm_two_sided for r in comparison.rows]
    return frame.set_index(["base_system", "head_system", "ablation", "measure", "slice"])


def comparison_frame(rows: Sequence[ComparisonRow]) -> pd.DataFrame:
    """One row per ablation, measure and slice: means, difference, interval, p-values, family, power, W/T/L.

    ``p`` is two-sided, ``p_worse`` the one-sided p of "head is worse" the gate tests, ``holm_p`` adjusted within
    the row's ``family`` (gate: over one-sided p; exploratory: over two-sided p). ``mde`` and ``underpowered`` are
    set on gated rows; ``disagreement`` says why the interval and the test disagree, empty when they agree.
    """
    frame = pd.DataFrame(
        [
            {
                "ablation": r.ablation,
                "measure": r.measure,
                "slice": r.slice,
                "n": r.queries,
                "base": r.base_mean,
                "head": r.head_mean,
                "difference": r.difference,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
                "p": r.p_value,
                "p_worse": r.p_one_sided,
                "holm_p": r.p_holm,
                "family": "gate" if r.gated else "exploratory",
                "mde": None if r.power is None else r.power.mde,
                "underpowered": None if r.power is None else r.power.underpowered,
                "wins": r.wins,
                "ties": r.ties,
                "losses": r.losses,
                "disagreement": r.disagreement or "",
            }
            for r in rows
        ]
    )
    return frame.set_index(["ablation", "measure", "slice"])


def interval_frame(report: Report) -> pd.DataFrame:
    """Every aggregate of a report with its bootstrap interval: rows (ablation, slice), cells 'mean [low, high]'."""
    standard = [*ANSWERABLE_MEASURES, *NO_ANSWER_MEASURES]
    held = {m for result in report.ablations.values() for m in result.per_query}
    order = [m for m in standard if m in held or not held] + sorted(held - set(standard))
    rows = []
    for ablation_id, result in sorted(
        report.ablations.items(),
        key=lambda item: ALL_ABLATION_IDS.index(item[0]) if item[0] in ALL_ABLATION_IDS else 99,
    ):
        for slice_name in SLICES:
            values, intervals = result.metrics.get(slice_name, {}), result.intervals.get(slice_name, {})
            row: dict[str, object] = {"ablation": ablation_id, "slice": slice_name}
            for measure in order:
                if measure in values and measure in intervals:
                    low, high = intervals[measure]
                    row[measure] = f"{values[measure]:.3f} [{low:.3f}, {high:.3f}]"
                else:
                    row[measure] = "-"
            rows.append(row)
    return pd.DataFrame(rows).set_index(["ablation", "slice"])


def plot_forest(rows: Sequence[ComparisonRow], measures: Sequence[str] = FOREST_MEASURES) -> Figure:
    """Forest plot: per measure a panel, per ablation the en and zh paired differences with their intervals (the
    ``all`` slice's when the reports name no language, as score reports without topics do)."""
    shown = [m for m in measures if any(r.measure == m for r in rows)]
    slices: list[str] = [lang for lang in LANGUAGES if any(r.slice == lang for r in rows)] or ["all"]
    ablations = list(dict.fromkeys(r.ablation for r in rows))
    by_key: dict[tuple[str, str, str], ComparisonRow] = {(r.ablation, r.measure, r.slice): r for r in rows}
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from evalkit.reporting.figures import FIGURE_RC, LANGUAGE_COLORS

    with matplotlib.rc_context(FIGURE_RC):
        figure = Figure(figsize=(3.0 * max(len(shown), 1), 0.6 * len(ablations) + 2.2), layout="constrained")
        axes = figure.subplots(1, max(len(shown), 1), sharey=True, squeeze=False)[0]
        positions = np.arange(len(ablations))
        for axis, measure in zip(axes, shown, strict=False):
            offsets = np.linspace(-0.15, 0.15, len(slices)) if len(slices) > 1 else np.zeros(1)
            for offset, language in zip(offsets, slices, strict=True):
                found = [by_key.get((a, measure, language)) for a in ablations]
                centre = np.array([np.nan if r is None else r.difference for r in found])
                low = np.array([np.nan if r is None else r.difference - r.ci_low for r in found])
                high = np.array([np.nan if r is None else r.ci_high - r.difference for r in found])
                axis.errorbar(
                    centre,
                    positions + offset,
                    xerr=np.vstack([low, high]),
                    fmt="o",
                    color=LANGUAGE_COLORS.get(language, "black"),
                    capsize=3,
                    label=language,
                )
            axis.axvline(0, color="black", linewidth=0.8)
            axis.set_title(measure)
            axis.set_xlabel("head minus base (mean, 95% CI)")
            axis.grid(axis="x", alpha=0.3)
        axes[0].set_yticks(positions, ablations)
        axes[0].invert_yaxis()
        handles = [Patch(color=LANGUAGE_COLORS.get(name, "black"), label=name) for name in slices]
        title = "slice" if slices == ["all"] else "query language"
        figure.legend(handles=handles, title=title, loc="outside right center")
        figure.suptitle("Paired differences per measure and slice (no_answer_fpr: lower is better)")
    return figure


def per_query_difference_frame(base: Report, head: Report, ablation: str, measure: str) -> pd.DataFrame:
    """Per query where the measure is defined: base, head and head minus base, largest gain first."""
    if ablation not in base.ablations or ablation not in head.ablations:
        raise ValueError(f"ablation {ablation!r} is not in both reports")
    before = base.ablations[ablation].per_query.get(measure)
    after = head.ablations[ablation].per_query.get(measure)
    if before is None or after is None:
        raise ValueError(f"measure {measure!r} has no per-query values for ablation {ablation!r}")
    rows = [
        {"query_id": query_id, "language": language, "base": b, "head": h, "difference": h - b}
        for query_id, language, b, h in zip(base.queries.query_ids, base.queries.languages, before, after, strict=True)
        if b is not None and h is not None
    ]
    frame = pd.DataFrame(rows, columns=["query_id", "language", "base", "head", "difference"])
    return frame.sort_values(["difference", "query_id"], ascending=[False, True]).reset_index(drop=True)


def plot_per_query_differences(frame: pd.DataFrame, ablation: str, measure: str) -> Figure:
    """Bars of the per-query differences (from :func:`per_query_difference_frame`), coloured by language."""
    labels = (f"queries, sorted by difference ({len(frame)} queries)", f"{measure} difference (head minus base)")
    title = f"{ablation} {measure} per query: {{up}} better, {{down}} worse"
    from evalkit.reporting.figures import per_query_bars

    return per_query_bars(frame.difference.tolist(), frame.language.tolist(), 4.2, labels, title)


def comparison_json(comparison: Comparison | PairwiseComparison) -> bytes:
    """Stable serialization: sorted keys, two-space indent, trailing newline."""
    return model_json(comparison)


def parse_comparison(text: str | bytes) -> Comparison:
    """Load a comparison of two reports written by :func:`comparison_json` (of more: ``PairwiseComparison``)."""
    return Comparison.model_validate_json(text)


def _gated_slices(rows: Sequence[ComparisonRow | PairRow]) -> str:
    """The slices the gated rows cover, in slice order (a fixture of one language has no rows of the other)."""
    return ", ".join(name for name in SLICES if any(r.gated and r.slice == name for r in rows)) or "no slice"
