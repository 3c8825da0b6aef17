"""Headless notebook runs: papermill into ``reports/<run-id>/`` with figures, JSON report and an HTML export.

:func:`run_notebook` checks the parameters against those the notebook declares (an unknown name is refused
before anything runs), executes the notebook with papermill in the project's own kernel, exports the executed
notebook to HTML with nbconvert (also when a cell failed, so the failure can be read), and returns what happened.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.output import resolve_output_path, write_atomic

DEFAULT_NOTEBOOK = Path("notebooks") / "retrieval_evaluation.ipynb"
REPORTS_DIR = "reports"
OUTPUT_PARAMETERS = {
    "report_output": "report.json",
    "summary_output": "summary.json",
    "figures_dir": "figures",
    "comparison_output": "comparison.json",
}
"""Output parameters a notebook may declare, and where a headless run puts them inside reports/<run-id>/."""


class NotebookParameterError(ValueError):
    """A parameter the notebook does not declare, or a value that cannot be parsed."""


@dataclass(frozen=True)
class NotebookRun:
    """Where a run's files are and how it ended."""

    run_dir: Path
    notebook: Path
    html: Path
    report: Path | None
    summary: Path | None
    figures: tuple[Path, ...]
    error_name: str | None
    error_message: str | None

    @property
    def passed(self) -> bool:
        """True when every cell ran without an exception."""
        return self.error_name is None


def default_run_id(now: dt.datetime | None = None) -> str:
    """A sortable run ID from the UTC time, e.g. ``20261202-104501``."""
    return (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%d-%H%M%S")


def parse_value(text: str) -> Any:
    """A ``-p`` value: JSON when it parses (numbers, booleans, null, lists), otherwise the plain string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def declared_parameters(notebook: Path) -> dict[str, Any]:
    """The parameters a notebook declares in its ``parameters`` cell (papermill's inspection)."""
    import papermill

    return dict(papermill.inspect_notebook(str(notebook)))


def check_parameters(notebook: Path, parameters: Mapping[str, Any]) -> None:
    """Refuse names the notebook does not declare, listing the declared ones."""
    declared = declared_parameters(notebook)
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise NotebookParameterError(
            f"{notebook.name} does not declare parameter(s) {', '.join(unknown)}; "
            f"it declares: {', '.join(sorted(declared))}"
        )


def export_html(executed: Path, target: Path) -> None:
    """Export an executed notebook to a standalone HTML file."""
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(executed, as_version=4))
    write_atomic(target, body.encode("utf-8"))


def _relativize_papermill_paths(executed: Path, root: Path) -> None:
    """papermill records absolute input and output paths in the notebook's metadata; keep them project-relative."""
    import nbformat

    notebook = nbformat.read(executed, as_version=4)
    recorded = notebook.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if recorded.get(key):
            path = Path(recorded[key])
            recorded[key] = path.resolve().relative_to(root.resolve()).as_posix() if path.is_absolute() else str(path)
    write_atomic(executed, nbformat.writes(notebook).encode("utf-8"))


def run_notebook(
    root: Path,
    parameters: Mapping[str, Any],
    notebook: Path = DEFAULT_NOTEBOOK,
    run_id: str | None = None,
) -> NotebookRun:
    """Execute a notebook headless into ``reports/<run-id>/`` and export it; never raises for a failing cell."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source = root / notebook
    check_parameters(source, parameters)
    for name in OUTPUT_PARAMETERS:
        if name in parameters and not (parameters[name] is None or isinstance(parameters[name], str)):
            raise NotebookParameterError(f"parameter {name} must be a workspace-relative path or null")
    run_id = run_id or default_run_id()
    relative_dir = f"{REPORTS_DIR}/{run_id}"
    executed = resolve_output_path(f"{relative_dir}/{source.name}", root)
    run_dir = executed.parent
    declared = declared_parameters(source)
    values = dict(parameters)
    for name, default in OUTPUT_PARAMETERS.items():
        if name in declared:
            values.setdefault(name, f"{relative_dir}/{default}")
    report = root / values["report_output"] if values.get("report_output") else None
    summary = root / values["summary_output"] if values.get("summary_output") else None
    error_name = error_message = None
    try:
        papermill.execute_notebook(
            str(source), str(executed), parameters=values, cwd=str(root), kernel_name="python3", progress_bar=False
        )
    except PapermillExecutionError as exc:
        error_name, error_message = exc.ename, exc.evalue
    _relativize_papermill_paths(executed, root)
    html = executed.with_suffix(".html")
    export_html(executed, html)
    figures_dir = root / values["figures_dir"] if values.get("figures_dir") else None
    figures = tuple(sorted(figures_dir.iterdir())) if figures_dir and figures_dir.is_dir() else ()
    return NotebookRun(
        run_dir=run_dir,
        notebook=executed,
        html=html,
        report=report if report is not None and report.exists() else None,
        summary=summary if summary is not None and summary.exists() else None,
        figures=figures,
        error_name=error_name,
        error_message=error_message,
    )
