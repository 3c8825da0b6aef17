"""Headless notebook runs: papermill into ``reports/<run-id>/`` with figures, JSON report and an HTML export.

:func:`run_notebook` checks the parameters against those the notebook declares (an unknown name is refused
before anything runs), executes the notebook with papermill in the project's own kernel, exports the executed
notebook to HTML with nbconvert (also when a cell failed, so the failure can be read), and returns what happened.

Everything is checked before anything is created (:func:`check_notebook_run`): parameter names, parameter values
(with the notebook's own parameter model, defaults filled in from its ``parameters`` cell), output paths and the run
ID; a run ID whose folder exists is refused unless ``replace=True``. papermill writes into a private temporary folder;
the executed notebook is then scrubbed of absolute workspace paths (also in tracebacks) and written into
``reports/<run-id>/`` with :func:`evalkit.common.output.write_atomic`, like every other file of the run.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalkit.app.labelling import LabelParameters
from evalkit.app.notebook import (
    BenchmarkParameters,
    EvaluationParameters,
    FailureAnalysisParameters,
    NotebookParameters,
)
from evalkit.common.output import OutputPathError, resolve_output_path, write_atomic
from evalkit.data.schema import is_identifier, validation_problems

DEFAULT_NOTEBOOK = Path("notebooks") / "retrieval_evaluation.ipynb"
REPORTS_DIR = "reports"
OUTPUT_PARAMETERS = {
    "report_output": "report.json",
    "summary_output": "summary.json",
    "figures_dir": "figures",
    "comparison_output": "comparison.json",
}
"""Output parameters a notebook may declare, and where a headless run puts them inside reports/<run-id>/."""
FOLDER_PARAMETERS = frozenset({"figures_dir", "cache_dir"})
INPUT_FOLDERS = frozenset({"fixture", "data_dir"})
"""Input parameters naming a folder that must exist when the run starts."""
INPUT_FILES = frozenset({"tasks", "labels_a", "labels_b", "base", "head"})
"""Input parameters naming a file that must exist when the run starts (``retriever`` too, when it is a .json
HTTP config: otherwise it names Python code)."""
PARAMETER_MODELS: dict[str, type[NotebookParameters]] = {
    "retrieval_evaluation.ipynb": EvaluationParameters,
    "failure_analysis.ipynb": FailureAnalysisParameters,
    "xquad_benchmark.ipynb": BenchmarkParameters,
    "label.ipynb": LabelParameters,
}
"""The parameter model each project notebook validates its parameters with (also checked before a run)."""


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


def _declared_defaults(declared: Mapping[str, Any]) -> dict[str, Any]:
    """The literal default of each declared parameter (papermill reports them as source text)."""
    defaults = {}
    for name, info in declared.items():
        text = info.get("default") if isinstance(info, dict) else None
        if isinstance(text, str):
            try:
                defaults[name] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                continue
    return defaults


def _check_values(source: Path, values: Mapping[str, Any], declared: Mapping[str, Any]) -> None:
    """Validate the merged parameter values with the notebook's parameter model (when it is a project notebook)."""
    model = PARAMETER_MODELS.get(source.name)
    if model is None:
        return
    merged = {**_declared_defaults(declared), **values}
    try:
        model.model_validate({name: merged[name] for name in model.model_fields if name in merged})
    except ValidationError as exc:
        problems = validation_problems(exc, None, _parameter_named)
        raise NotebookParameterError(f"invalid parameter value(s) for {source.name}: " + "; ".join(problems)) from None


def _parameter_named(raw: Any, loc: tuple[int | str, ...]) -> str:
    del raw  # the parameter's path is the whole description
    return ".".join(str(part) for part in loc) or "(parameters)"


def _check_outputs(root: Path, values: Mapping[str, Any]) -> None:
    """Refuse unsafe output paths now (nothing is created), rather than in a cell after the run folder exists."""
    for name in (*OUTPUT_PARAMETERS, *FOLDER_PARAMETERS):
        value = values.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise NotebookParameterError(f"parameter {name} must be a workspace-relative path or null")
        requested = value.rstrip("/") + "/.folder" if name in FOLDER_PARAMETERS else value
        try:
            resolve_output_path(requested, root)
        except OutputPathError as exc:
            raise NotebookParameterError(f"parameter {name}: {exc}") from None


def _check_inputs(root: Path, values: Mapping[str, Any], declared: Mapping[str, Any]) -> None:
    """Refuse a missing input folder or file now, naming the parameter, rather than in a cell after the run folder
    and its notebook exist."""
    merged = {**_declared_defaults(declared), **values}
    for name, value in merged.items():
        if not isinstance(value, str) or name not in declared:
            continue
        folder = name in INPUT_FOLDERS
        if not (folder or name in INPUT_FILES or (name == "retriever" and value.endswith(".json"))):
            continue
        path = root / value
        if not (path.is_dir() if folder else path.is_file()):
            kind = "folder" if folder else "file"
            raise NotebookParameterError(
                f"parameter {name}: {value!r} is no {kind} (paths are relative to the project root)"
            )


def check_notebook_run(
    root: Path, source: Path, parameters: Mapping[str, Any], run_id: str, replace: bool = False
) -> dict[str, Any]:
    """Check everything a run needs before anything is created; return the parameter values to inject.

    Raises:
        NotebookParameterError: an undeclared name, an invalid value, an unsafe output path, a missing input
            folder or file, an invalid run ID, or a run ID whose folder exists (unless `replace`).
    """
    check_parameters(source, parameters)
    if not is_identifier(run_id):
        raise NotebookParameterError(
            f"run ID {run_id[:60]!r} is not valid: use ASCII letters, digits and . _ : - (at most 128 characters)"
        )
    declared = declared_parameters(source)
    relative_dir = f"{REPORTS_DIR}/{run_id}"
    values = dict(parameters)
    for name, default in OUTPUT_PARAMETERS.items():
        if name in declared:
            values.setdefault(name, f"{relative_dir}/{default}")
    _check_values(source, values, declared)
    _check_outputs(root, values)
    try:
        run_dir = resolve_output_path(f"{relative_dir}/{source.name}", root).parent
    except OutputPathError as exc:
        raise NotebookParameterError(str(exc)) from None
    if run_dir.exists() and not replace:
        raise NotebookParameterError(
            f"run ID {run_id!r} was used before ({relative_dir}/ exists): choose another --run-id, "
            "or pass --replace-run to overwrite its files"
        )
    _check_inputs(root, values, declared)
    return values


def _scrub_paths(notebook: Any, root: Path, private: tuple[str, ...]) -> None:
    """Replace absolute workspace (and temporary) paths in every cell output, tracebacks included."""
    prefixes = sorted({*private, str(root.resolve())}, key=len, reverse=True)

    def scrub(text: str) -> str:
        for prefix in prefixes:
            text = text.replace(prefix + "/", "").replace(prefix, ".")
        return text

    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "traceback" in output:
                output["traceback"] = [scrub(line) for line in output["traceback"]]
            for key in ("text", "evalue"):
                if isinstance(output.get(key), str):
                    output[key] = scrub(output[key])
            for mime, value in output.get("data", {}).items():
                if mime.startswith("text/") and isinstance(value, str):
                    output["data"][mime] = scrub(value)


def _store_executed(scratch: Path, target: Path, root: Path, relative: str, source: Path) -> None:
    """Write papermill's output into the run folder: project-relative metadata, no absolute paths in outputs."""
    import nbformat

    notebook = nbformat.read(scratch, as_version=4)
    recorded = notebook.metadata.get("papermill", {})
    if recorded:
        recorded["input_path"] = source.resolve().relative_to(root.resolve()).as_posix()
        recorded["output_path"] = relative
    _scrub_paths(notebook, root, (str(scratch.parent), str(scratch.parent.resolve())))
    write_atomic(target, nbformat.writes(notebook).encode("utf-8"))


def _kernel_logging_to(log: Path) -> type:
    """A kernel manager whose kernel writes its own stderr to `log` rather than to the command's: the kernel's log
    lines (a warning at every start, a traceback when the command is interrupted while a cell's reply is on its
    way) are not the command's output; a cell's own output goes into the notebook either way."""
    from jupyter_client.manager import AsyncKernelManager

    class KernelLoggingToFile(AsyncKernelManager):
        async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]  # the async manager's is async
            with log.open("ab") as handle:  # the kernel process holds its own copy of the descriptor
                await super().start_kernel(**kw, stderr=handle)

    return KernelLoggingToFile


_KERNEL_DIED = (
    "the kernel died while a cell ran (killed from outside, for want of memory perhaps, or crashed); the notebook in "
    "the run folder shows the cells it ran"
)


def _remove_outputs(files: list[Path | None], figures_dir: Path | None) -> None:
    """Remove a run's earlier outputs before it is run again in place (``--replace-run``): its files, and the
    figures folder it draws into (never following a symlink)."""
    for path in files:
        if path is not None and (path.is_file() or path.is_symlink()):
            path.unlink()
    if figures_dir is not None and figures_dir.is_dir() and not figures_dir.is_symlink():
        shutil.rmtree(figures_dir)


def run_notebook(
    root: Path,
    parameters: Mapping[str, Any],
    notebook: Path = DEFAULT_NOTEBOOK,
    run_id: str | None = None,
    replace: bool = False,
) -> NotebookRun:
    """Execute a notebook headless into ``reports/<run-id>/`` and export it; never raises for a failing cell.

    Every check (:func:`check_notebook_run`) happens before anything is created, so a refused run leaves the
    workspace as it found it.
    """
    import papermill
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    source = root / notebook
    run_id = run_id or default_run_id()
    values = check_notebook_run(root, source, parameters, run_id, replace)
    relative_dir = f"{REPORTS_DIR}/{run_id}"
    executed = resolve_output_path(f"{relative_dir}/{source.name}", root)
    run_dir = executed.parent
    report = root / values["report_output"] if values.get("report_output") else None
    summary = root / values["summary_output"] if values.get("summary_output") else None
    figures_dir = root / values["figures_dir"] if values.get("figures_dir") else None
    if replace:  # the earlier run's outputs go first: a failed rerun must not leave (and list) its report
        _remove_outputs([executed, executed.with_suffix(".html"), report, summary], figures_dir)
    error_name = error_message = None
    with tempfile.TemporaryDirectory(prefix="evalkit-notebook-") as scratch_dir:
        scratch, kernel_log = Path(scratch_dir) / source.name, Path(scratch_dir) / "kernel.log"
        try:
            papermill.execute_notebook(
                str(source),
                str(scratch),
                parameters=values,
                cwd=str(root),
                kernel_name="python3",
                progress_bar=False,
                kernel_manager_class=_kernel_logging_to(kernel_log),
            )
        except PapermillExecutionError as exc:
            error_name, error_message = exc.ename, exc.evalue
        except DeadKernelError:
            error_name, error_message = "DeadKernelError", _KERNEL_DIED
        if not scratch.exists():  # the kernel died before papermill saved the notebook once
            raise OSError(f"notebook {source.name}: {error_message or 'papermill wrote no notebook'}")
        _store_executed(scratch, executed, root, f"{relative_dir}/{source.name}", source)
    html = executed.with_suffix(".html")
    export_html(executed, html)
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
