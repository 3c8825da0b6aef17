"""The README stays a front door, its links resolve, and every docs page is in the site's nav.

`mkdocs build --strict` (part of ``make test``) checks the site itself: links between pages, anchors and the API
reference. These checks need no docs tools, so they run in every install.
"""

from __future__ import annotations

import re

import pytest

from .conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_at_most_250_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES


def test_every_relative_link_of_the_readme_names_a_file() -> None:
    targets = [t for t in LINK.findall(README.read_text(encoding="utf-8")) if "://" not in t]
    assert targets
    missing = [t for t in targets if not (ROOT / t.split("#", 1)[0]).is_file()]
    assert missing == []


def _nav_pages(entries: object) -> set[str]:
    """Every page path named in an mkdocs nav (nested lists and one-key mappings)."""
    if isinstance(entries, str):
        return {entries}
    if isinstance(entries, list):
        return set().union(*(_nav_pages(entry) for entry in entries))
    if isinstance(entries, dict):
        return set().union(*(_nav_pages(value) for value in entries.values()))
    return set()


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with the docs extra (pip install 'evalkit[docs]')")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_pages(config["nav"])
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert pages - nav == set()
    assert nav - pages == set()


def test_the_design_page_lists_every_module_of_each_folder() -> None:
    """The folder table of docs/design.md names every module and subpackage of each folder it has a row for."""
    page = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `evalkit/([a-z_]+)/` \| (.*) \|$", page, flags=re.MULTILINE)
    assert {folder for folder, _ in rows} >= {"data", "retrieval", "measures", "reporting", "runs", "app", "common"}
    for folder, text in rows:
        named = set(re.findall(r"`([a-z_0-9]+/?)`", text))
        root = ROOT / "evalkit" / folder
        modules = {p.stem for p in root.glob("*.py") if p.stem != "__init__"}
        packages = {f"{d.name}/" for d in root.iterdir() if (d / "__init__.py").is_file()}
        assert sorted((modules | packages) - named) == [], f"evalkit/{folder}/ row of docs/design.md"
