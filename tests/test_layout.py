"""The package layout follows the data flow: no module imports from a layer above its own, and the report of the
synthetic suite did not change when the modules moved."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from evalkit.runs.evaluation import Evaluation

from .conftest import ROOT

PACKAGE = ROOT / "evalkit"
# What each layer may import from evalkit, by first component under evalkit: the data flow, inputs (data) ->
# systems that produce runs (retrieval) -> the scoring core (measures) -> what goes out (reporting); above them the
# runs of systems over queries (runs), and above those the front doors (app). `common` (safe output, progress) is
# a leaf every layer may use.
LOWER = ("common", "data", "retrieval", "measures", "reporting", "runs", "app")
ALLOWED: dict[str, set[str]] = {
    "common": {"common"},
    "data": {"common", "data"},
    "retrieval": {"common", "data", "retrieval"},
    "measures": {"common", "data", "measures"},
    "reporting": {"common", "data", "measures", "reporting"},
    "runs": {"common", "data", "retrieval", "measures", "reporting", "runs"},
    "app": {"common", "data", "retrieval", "measures", "reporting", "runs", "app"},
    "top": set(LOWER),
}
PROJECTION_SHA256 = "b962b45b8b454cb451e71ad17fe03081b860202e22b0dd5121726c664a2f003c"
"""The synthetic suite's deterministic projection (rankings with scores, per-query metrics, failures), unchanged by
the modules' move into their folders; changed once since, when max-normalized fusion came to normalize before
weighting (last-bit changes of fused scores). Change it only in a reviewed commit that says why the numbers moved."""


def _layer(module: Path) -> str:
    parts = module.relative_to(PACKAGE).with_suffix("").parts
    return parts[0] if len(parts) > 1 else "top"


def _imported(module: Path) -> set[str]:
    """First components under evalkit of everything the module imports, at any depth (function-local too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found.update(n.split(".")[1] for n in names if n.startswith("evalkit.") and n.count(".") >= 1)
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_higher_layer(module: Path) -> None:
    layer = _layer(module)
    forbidden = _imported(module) - ALLOWED[layer]
    assert forbidden == set(), f"{module.relative_to(ROOT)} ({layer}) imports {sorted(forbidden)}"


def test_layers_cover_every_module() -> None:
    assert {_layer(m) for m in MODULES} == set(ALLOWED)


def test_only_the_package_face_stays_at_the_top() -> None:
    assert sorted(m.name for m in MODULES if _layer(m) == "top") == ["__init__.py", "__main__.py"]


def test_the_layer_check_can_fail(tmp_path: Path) -> None:
    fake = tmp_path / "evalkit" / "data" / "bad.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("def f():\n    from evalkit.reporting.report import Report\n", encoding="utf-8")
    assert _imported(fake) == {"reporting"}
    assert "reporting" not in ALLOWED["data"]


def _module_name(module: Path) -> str:
    parts = module.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(module: Path, known: set[str]) -> set[str]:
    """The evalkit modules `module` imports, at any depth (function-local and TYPE_CHECKING imports too): for
    ``from evalkit.x import y``, ``evalkit.x.y`` when that is a module, else ``evalkit.x``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("evalkit"):
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if name in known else node.module)
    return found & known


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted: modules that import each
    other, directly or through others."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_two_modules_import_each_other() -> None:
    """No circle of imports between modules (the package faces, which only hand names on, excepted): two modules
    that import each other are one concept split badly, or a missing lower module."""
    known = {_module_name(m) for m in MODULES}
    graph = {_module_name(m): _module_imports(m, known) - {"evalkit"} for m in MODULES if m.name != "__init__.py"}
    assert import_circles(graph) == []


def test_the_circle_check_can_fail() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert import_circles(graph) == [["a", "b", "c"]]


def test_report_bytes_unchanged_by_the_move(synthetic_evaluation: Evaluation) -> None:
    assert synthetic_evaluation.projection_sha256 == PROJECTION_SHA256


def test_the_tests_mirror_the_package() -> None:
    tests = ROOT / "tests"
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == layers, f"test folders {sorted(folders)} do not mirror the package's {sorted(layers)}"
    at_the_top = sorted(p.name for p in tests.glob("test_*.py"))
    assert at_the_top == [
        "test_ci_skips.py",
        "test_docs.py",
        "test_docs_commands.py",
        "test_layout.py",
        "test_package.py",
    ], at_the_top
