"""The measure table of ``docs/measures.md``, rendered from the family declarations.

The page keeps its hand-written prose; the part between :data:`START` and :data:`END` is this module's rendering of
:data:`~evalkit.measures.registry.FAMILIES` (names in both vocabularies, the typed parameters a name may set in
parentheses, definition, what each family does with unjudged documents, which queries it is defined on). ``python -m
evalkit.measures.docs`` rewrites that part; ``--check`` only says whether it is current (exit 1 when not), and a
test runs the same check.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from evalkit.measures.declaration import GAIN_TEXT, UNJUDGED, Family
from evalkit.measures.registry import FAMILIES

__all__ = ["END", "START", "main", "measure_table", "render_page"]

START: Final = (
    "<!-- measure table: rendered by `python -m evalkit.measures.docs` from the declarations; do not edit -->"
)
END: Final = "<!-- end of the rendered measure table -->"
DEFAULT_PAGE: Final = Path("docs/measures.md")

_DEFINED_ON: Final = {"answerable": "answerable queries", "no_answer": "no-answer queries"}


def _code(text: str) -> str:
    return f"`{text}`"


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a ``|`` would end the cell."""
    return text.replace("|", "\\|")


def _evalkit_name(family: Family) -> str:
    name = family.name
    shadowed = any(t.stem == name and not t.cut for t in family.trec_eval)  # bare `ndcg`, `map`: trec_eval's
    if family.cutoff == "none":
        text = _code(name)
    elif family.cutoff == "optional" and not shadowed:
        text = f"{_code(name + '@k')} ({_code(name)}: whole ranking)"
    else:
        text = _code(f"{name}@k")
    if family.default_gain is not None:
        text += f" ({GAIN_TEXT[family.default_gain]})"
    return text


def _trec_eval_names(family: Family) -> str:
    names = ", ".join(_code(t.form) for t in family.trec_eval)
    gains = sorted({t.gain for t in family.trec_eval if t.gain is not None and t.gain != family.default_gain})
    return names + "".join(f" ({GAIN_TEXT[g]})" for g in gains)


def _definition(family: Family) -> str:
    return family.description + (". Needs gold answer spans (a fixture)." if family.needs_spans else "")


def _parameters(family: Family) -> str:
    named = [_code(p.form) for p in family.params if p.name != "k"]
    return ", ".join(named) or "none"


def _defined_on(family: Family) -> str:
    where = _DEFINED_ON[family.defined_on]
    return f"{where} (trec_eval's names: every judged query)" if family.trec_eval else where


def measure_table() -> str:
    """The rendered part of the page: one row per built-in family, then what each parameter and each
    unjudged-document policy means."""
    lines = [
        "| evalkit name | parameters | trec_eval name | definition | unjudged documents | defined on |",
        "|---|---|---|---|---|---|",
    ]
    for family in FAMILIES.values():
        cells = (_evalkit_name(family), _parameters(family), _trec_eval_names(family), _definition(family))
        tail = (UNJUDGED[family.unjudged].label, _defined_on(family))
        lines.append("| " + " | ".join([*(_cell(c) for c in cells), *tail]) + " |")
    lines += ["", "What the parameters mean (written in parentheses after the name, `precision(rel=2)@5`):", ""]
    params = {p.name: p for family in FAMILIES.values() for p in family.params if p.name != "k"}
    lines += [f"- {_code(p.form)}: {p.description} (default {p.default})" for p in params.values()]
    lines += ["", "What the unjudged-documents column means:", ""]
    used = dict.fromkeys(family.unjudged for family in FAMILIES.values())
    lines += [f"- *{UNJUDGED[policy].label}*: {UNJUDGED[policy].statement}" for policy in used]
    return "\n".join(lines)


def render_page(page: str) -> str:
    """``page`` with the part between :data:`START` and :data:`END` replaced by :func:`measure_table`.

    ``ValueError`` when the markers are missing, repeated or out of order.
    """
    if page.count(START) != 1 or page.count(END) != 1 or page.index(START) > page.index(END):
        raise ValueError(f"the page needs one {START!r} line followed by one {END!r} line")
    head, rest = page.split(START)
    _, tail = rest.split(END)
    return f"{head}{START}\n{measure_table()}\n{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the page's measure table, or with ``--check`` exit 1 when it is not current."""
    parser = argparse.ArgumentParser(
        prog="python -m evalkit.measures.docs", description="Render the measure table of docs/measures.md."
    )
    parser.add_argument("page", nargs="?", type=Path, default=DEFAULT_PAGE, help="the Markdown page (%(default)s)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when the table is not current")
    args = parser.parse_args(argv)
    page = args.page.read_text(encoding="utf-8")
    rendered = render_page(page)
    if rendered == page:
        return 0
    if args.check:
        print(f"{args.page}: the measure table differs from the declarations; run python -m evalkit.measures.docs")
        return 1
    args.page.write_text(rendered, encoding="utf-8")
    print(f"{args.page}: measure table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
