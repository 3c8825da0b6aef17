"""The labelling notebook in a real browser: JupyterLab on localhost, Debian's chromium driven by Playwright.

The test copies notebooks/label.ipynb into a git-ignored folder of its own under reports/ with a tiny fixture whose
Chinese chunk starts with a character outside the Basic Multilingual Plane (two UTF-16 code units in the browser,
one Python character), and a pool of three pairs. It runs the cells, grades the first pair with the key 0, selects
Chinese text with the mouse, checks the exact characters shown back and the Python offsets on disk, grades with the
key 2, then shuts the kernel down, reloads the page, runs the cells again and checks that the notebook resumes at
the third pair. Last it adjudicates: a second reviewer's file that disagrees on one pair, the adjudication notebook
showing that pair alone with both reviews, and the adjudicator's decision in a third file. Playwright never
downloads a browser here: it drives /usr/bin/chromium (``apt-get install chromium``; .ci/run installs it). Under
CI a missing browser, Playwright, JupyterLab or anywidget fails the test.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from evalkit.data.fixture import Fixture, load_fixture
from evalkit.data.labels import read_labels

from ..conftest import ROOT, TINY_DIR

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ASTRAL = "\U00020bb7"  # 𠮷: two UTF-16 code units, one Python character
WAIT_MS = 120_000


def _require() -> None:
    """Skip (fail under CI) when the browser, Playwright, JupyterLab or anywidget is missing."""
    missing = [f"chromium at {CHROMIUM} (apt-get install chromium)"] if not os.access(CHROMIUM, os.X_OK) else []
    for module in ("playwright", "jupyterlab", "anywidget"):
        if importlib.util.find_spec(module) is None:
            missing.append(f"the Python package {module} (pip install -e '.[dev]')")
    if not missing:
        return
    reason = "the labelling browser test needs " + " and ".join(missing)
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {reason}", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _workspace(folder: Path) -> dict[str, str]:
    """The notebook, fixture and pool the test labels, in `folder` (inside the project: paths resolve from it)."""
    fixture = json.loads((TINY_DIR / "fixture.json").read_text(encoding="utf-8"))
    chunk = next(c for c in fixture["chunks"] if c["chunk_id"] == "zh-export-01")
    chunk["text"] = ASTRAL + chunk["text"]  # no judgment names this chunk, so no span moves
    (folder / "fixture").mkdir()
    (folder / "fixture" / "fixture.json").write_text(json.dumps(fixture, ensure_ascii=False), encoding="utf-8")
    shutil.copy(TINY_DIR / "aliases.json", folder / "fixture" / "aliases.json")
    pairs = [("q-en-001", "en", "en-trash-02"), ("q-zh-001", "zh", "zh-export-01"), ("q-zh-002", "zh", "zh-billing-01")]
    rows = [{"query_id": q, "language": lang, "doc_id": c, "chunk_id": c, "best_rank": 1} for q, lang, c in pairs]
    (folder / "pool.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    relative = folder.relative_to(ROOT).as_posix()
    values = {
        "fixture": f"{relative}/fixture",
        "tasks": f"{relative}/pool.jsonl",
        "labels": f"{relative}/labels/reviewer-a.jsonl",
    }
    _notebook(folder / "label.ipynb", values)
    return values


def _notebook(path: Path, values: dict[str, str]) -> None:
    """A copy of notebooks/label.ipynb whose parameters cell sets `values` after the defaults."""
    notebook = nbformat.read(ROOT / "notebooks" / "label.ipynb", as_version=4)
    cell = next(c for c in notebook.cells if c.cell_type == "code")
    cell.source += "\n" + "\n".join(f"{name} = {value!r}" for name, value in values.items())
    nbformat.write(notebook, path)


@contextlib.contextmanager
def _jupyterlab(folder: Path, port: int, token: str) -> Iterator[str]:
    """JupyterLab serving `folder` on localhost, its configuration and runtime files in `folder`/.jupyter; stopped
    (its kernels with it) on the way out."""
    home = folder / ".jupyter"
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "IPYTHONDIR": str(home / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        "--ServerApp.terminals_enabled=False",
        f"--ServerApp.root_dir={folder}",
        f"--LabServerApp.user_settings_dir={home / 'settings'}",
        f"--LabServerApp.workspaces_dir={home / 'workspaces'}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        "--LabApp.expose_app_in_browser=True",
        *(["--allow-root"] if os.geteuid() == 0 else []),  # CI runs as root
    ]
    settings = home / "settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text('{"autosave": false}', encoding="utf-8")
    log = (folder / "jupyterlab.log").open("wb")
    server = subprocess.Popen(argv, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n" + _tail(folder / "jupyterlab.log")) from None
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
        log.close()


def _tail(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-4000:]


def _api(url: str, token: str, method: str, path: str) -> Any:
    request = urllib.request.Request(f"{url}{path}", method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body else None


def _run_all(page: Any) -> None:
    """Run every cell of the notebook shown, with JupyterLab's own command, once its kernel is idle; wait for the
    labelling panel in that notebook."""
    page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=WAIT_MS)
    page.wait_for_function(
        "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        " const kernel = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;"
        " return kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle'; }",
        timeout=WAIT_MS,
    )
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.node.querySelector('.evalkit-label .evalkit-chunk-text')",
        timeout=WAIT_MS,
    )


def _select(page: Any, start16: int, end16: int) -> None:
    """Drag the mouse over the chunk text from UTF-16 offset `start16` to `end16`, as a reviewer selects."""
    box = page.evaluate(
        """([start, end]) => {
            const text = document.querySelector('.evalkit-label .evalkit-chunk-text');
            const node = text.firstChild;
            const rect = (from, to) => { const r = document.createRange(); r.setStart(node, from); r.setEnd(node, to);
                                         return r.getBoundingClientRect(); };
            const first = rect(start, start + 1), last = rect(end - 1, end);
            return {x0: first.left + 1, y0: first.top + first.height / 2, x1: last.right - 1,
                    y1: last.top + last.height / 2};
        }""",
        [start16, end16],
    )
    page.mouse.move(box["x0"], box["y0"])
    page.mouse.down()
    page.mouse.move((box["x0"] + box["x1"]) / 2, box["y1"], steps=5)
    page.mouse.move(box["x1"], box["y1"], steps=5)
    page.mouse.up()


def _wait_for_pair(page: Any, chunk_id: str) -> None:
    page.wait_for_function(
        "(id) => { const m = document.querySelector('.evalkit-label .evalkit-chunk .evalkit-meta');"
        " return m && m.textContent.startsWith('chunk ' + id + ' '); }",
        arg=chunk_id,
        timeout=WAIT_MS,
    )


def _label_and_resume(page: Any, url: str, token: str, labels: Path, fixture: Fixture) -> None:
    """Grade with the keyboard, mark a Chinese span with the mouse, then reopen in a fresh kernel."""
    page.goto(f"{url}/lab/tree/label.ipynb?token={token}", timeout=WAIT_MS)
    _run_all(page)
    _wait_for_pair(page, "en-trash-02")
    code_cells = page.locator(".jp-Notebook .jp-CodeCell").count()
    page.click(".evalkit-label .evalkit-position")  # the panel takes the keyboard
    page.keyboard.press("0")
    _wait_for_pair(page, "zh-export-01")
    assert page.locator(".jp-Notebook .jp-CodeCell").count() == code_cells, "a key changed a cell"
    assert [(d.chunk_id, d.grade, d.spans) for d in read_labels(labels, fixture)] == [("en-trash-02", 0, ())]

    assert page.inner_text(".evalkit-label .evalkit-chunk-text").startswith(ASTRAL + "笔记可以导出为")
    _select(page, 6, 9)  # 导出为: UTF-16 units 6-9, Python characters 5-8
    page.wait_for_selector(".evalkit-label .evalkit-span-text", timeout=WAIT_MS)
    assert page.inner_text(".evalkit-label .evalkit-span-text") == "导出为"
    assert page.inner_text(".evalkit-label .evalkit-offsets").strip() == "[5, 8)"
    assert page.inner_text(".evalkit-label .evalkit-chunk-text mark") == "导出为"
    page.fill(".evalkit-label .evalkit-note", "只说了导出")
    page.click(".evalkit-label .evalkit-position")
    page.keyboard.press("2")  # in JupyterLab's command mode, 2 alone would make a heading cell
    _wait_for_pair(page, "zh-billing-01")
    assert page.locator(".jp-Notebook .jp-CodeCell").count() == code_cells, "a key changed a cell"
    page.keyboard.press("b")  # back to the pair just decided: its note is shown, and kept when it is graded again
    _wait_for_pair(page, "zh-export-01")
    assert page.input_value(".evalkit-label .evalkit-note") == "只说了导出"
    page.keyboard.press("2")
    _wait_for_pair(page, "zh-billing-01")
    assert [(d.chunk_id, d.grade, d.spans, d.reviewer, d.note) for d in read_labels(labels, fixture)] == [
        ("en-trash-02", 0, (), "reviewer-a", None),
        ("zh-export-01", 2, ((5, 8),), "reviewer-a", "只说了导出"),
    ]
    assert next(c.text for c in fixture.chunks if c.chunk_id == "zh-export-01")[5:8] == "导出为"

    for running in _api(url, token, "GET", "/api/sessions"):  # a fresh kernel reads the file again
        _api(url, token, "DELETE", f"/api/sessions/{running['id']}")
    page.reload(timeout=WAIT_MS)
    _run_all(page)
    _wait_for_pair(page, "zh-billing-01")
    assert page.inner_text(".evalkit-label .evalkit-position") == "pair 3 of 3"
    progress = page.inner_text(".evalkit-label .evalkit-progress")
    assert progress == "en: 1 done / 0 to do · zh: 1 done / 1 to do · all: 2 done / 1 to do"


def _adjudicate(page: Any, url: str, token: str, folder: Path, values: dict[str, str], fixture: Fixture) -> None:
    """A second reviewer's file that disagrees on one pair; the adjudication shows that pair alone, both reviews."""
    relative = folder.relative_to(ROOT).as_posix()
    second = folder / "labels" / "reviewer-b.jsonl"
    rows = [
        {"query_id": "q-en-001", "chunk_id": "en-trash-02", "grade": 0, "spans": [], "reviewer": "reviewer-b"},
        {"query_id": "q-zh-001", "chunk_id": "zh-export-01", "grade": 3, "spans": [[5, 8]], "reviewer": "reviewer-b"},
    ]
    second.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    adjudicated = folder / "labels" / "adjudicator.jsonl"
    _notebook(
        folder / "adjudicate.ipynb",
        {
            "fixture": values["fixture"],
            "mode": "adjudicate",
            "reviewer": "adjudicator",
            "labels": f"{relative}/labels/adjudicator.jsonl",
            "labels_a": values["labels"],
            "labels_b": f"{relative}/labels/reviewer-b.jsonl",
        },
    )
    # A workspace of its own, reset, so that the labelling notebook is not open beside it.
    page.goto(f"{url}/lab/workspaces/adjudication/tree/adjudicate.ipynb?reset&token={token}", timeout=WAIT_MS)
    _run_all(page)
    _wait_for_pair(page, "zh-export-01")
    assert page.inner_text(".evalkit-label .evalkit-position") == "pair 1 of 1"
    reviews = page.locator(".evalkit-label .evalkit-review")
    assert [reviews.nth(i).locator("b").inner_text() for i in range(2)] == [
        "reviewer-a: grade 2",
        "reviewer-b: grade 3",
    ]
    assert [reviews.nth(i).locator(".evalkit-span-text").inner_text() for i in range(2)] == ["导出为", "导出为"]
    page.click(".evalkit-label .evalkit-position")
    _select(page, 6, 9)
    page.wait_for_selector(".evalkit-label .evalkit-marked .evalkit-span-text", timeout=WAIT_MS)
    page.keyboard.press("3")
    page.wait_for_selector(".evalkit-label .evalkit-finished", timeout=WAIT_MS)
    assert [(d.chunk_id, d.grade, d.spans, d.reviewer) for d in read_labels(adjudicated, fixture)] == [
        ("zh-export-01", 3, ((5, 8),), "adjudicator")
    ]


def test_label_in_a_real_browser(tmp_path: Path) -> None:
    _require()
    from playwright.sync_api import sync_playwright

    folder = ROOT / "reports" / f"pytest-label-{secrets.token_hex(4)}"
    folder.mkdir(parents=True)
    token = secrets.token_hex(16)
    try:
        values = _workspace(folder)
        fixture = load_fixture(ROOT / values["fixture"]).fixture
        with _jupyterlab(folder, _free_port(), token) as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(WAIT_MS)
                page.on("dialog", lambda dialog: dialog.accept())  # "leave the page?" on reload
                try:
                    _label_and_resume(page, url, token, ROOT / values["labels"], fixture)
                    _adjudicate(page, url, token, folder, values, fixture)
                except Exception:
                    page.screenshot(path=tmp_path / "failure.png", full_page=True)
                    print(f"screenshot of the page: {tmp_path / 'failure.png'}")
                    raise
            finally:
                browser.close()
    except Exception:
        log = folder / "jupyterlab.log"
        if log.exists():
            print(_tail(log))
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)
