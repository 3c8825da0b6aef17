"""docs/measures.md's measure table is the rendering of the declarations, so CI fails when the two differ."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.measures.docs import END, START, main, measure_table, render_page
from evalkit.measures.registry import FAMILIES

from ..conftest import ROOT

PAGE = ROOT / "docs" / "measures.md"


def test_the_page_holds_the_table_the_declarations_render() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert render_page(page) == page, "docs/measures.md is stale: run python -m evalkit.measures.docs"


def test_every_family_has_a_row_with_its_unjudged_policy() -> None:
    rows = [line for line in measure_table().splitlines() if line.startswith("| `")]
    assert len(rows) == len(FAMILIES)
    for row, family in zip(rows, FAMILIES.values(), strict=True):
        assert row.startswith(f"| `{family.name}")
    assert "| `judged@k` | none |  | judged documents (grade 0 or more; a negative grade is trec_eval's pooled" in (
        measure_table()
    )


def test_every_typed_parameter_is_listed_with_its_meaning() -> None:
    table = measure_table()
    assert "| `precision@k` | `rel=<integer>` | `P_k` |" in table
    assert "| `ndcg@k` (gain 2^grade - 1) | `gain=exponential\\|linear` |" in table
    assert "- `rel=<integer>`: the grade from which a document counts as relevant" in table


def test_the_check_fails_on_a_hand_edited_table(tmp_path: Path) -> None:
    page = tmp_path / "measures.md"
    current = PAGE.read_text(encoding="utf-8")
    page.write_text(current.replace("| `rprec` |", "| `rprec` (edited) |"), encoding="utf-8")
    assert main(["--check", str(page)]) == 1
    assert main([str(page)]) == 0  # rewritten
    assert page.read_text(encoding="utf-8") == current
    assert main(["--check", str(page)]) == 0


def test_prose_outside_the_markers_is_kept() -> None:
    page = f"# Title\n\nbefore\n\n{START}\nold table\n{END}\n\nafter\n"
    rendered = render_page(page)
    assert rendered.startswith("# Title\n\nbefore\n\n" + START + "\n| evalkit name |")
    assert rendered.endswith(f"{END}\n\nafter\n")
    assert "old table" not in rendered


@pytest.mark.parametrize(
    "page", ["no markers", f"{START}\nonly the start", f"{END}\n{START}\n", f"{START}\n{END}\n{START}\n{END}\n"]
)
def test_missing_or_misplaced_markers_are_refused(page: str) -> None:
    with pytest.raises(ValueError, match="the page needs one"):
        render_page(page)
