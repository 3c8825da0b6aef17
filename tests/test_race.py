"""A folder swapped for a symlink while evalkit writes: no byte may land outside the workspace.

A separate process exchanges a folder of the destination with a symlink to a folder outside the workspace in a
tight loop (``renameat2(RENAME_EXCHANGE)`` when the C library has it, otherwise rename and symlink), while this
process resolves and writes at least 200 reports through :func:`evalkit.output.write_atomic`. Every write must
either land inside the workspace or be refused; the outside folder must stay empty. The test is bounded in time.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit.output import OutputPathError, resolve_output_path, write_atomic

WRITES = 200
TIME_LIMIT_S = 60.0

SWAPPER = r"""
import ctypes, os, sys, time
workspace, stop = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
renameat2 = getattr(libc, "renameat2", None)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
real, link = os.path.join(workspace, "out"), os.path.join(workspace, "link")
hold = os.path.join(workspace, "hold")
swaps = 0
deadline = time.monotonic() + 120
while not os.path.exists(stop) and time.monotonic() < deadline:
    if renameat2 is not None and renameat2(AT_FDCWD, real.encode(), AT_FDCWD, link.encode(), RENAME_EXCHANGE) == 0:
        swaps += 1
        continue
    renameat2 = None
    try:  # fallback: move the real folder away, put a symlink in its place, then restore
        os.rename(real, hold)
        os.symlink(os.readlink(link), real)
        os.unlink(real)
        os.rename(hold, real)
        swaps += 1
    except OSError:
        pass
print(swaps)
"""


def _files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if not p.is_dir() or p.is_symlink()]


@pytest.mark.skipif(sys.platform != "linux", reason="the swap uses Linux rename semantics")
def test_symlink_swap_race_never_writes_outside_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "out").mkdir()
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    for index in range(7):  # the attacker prepares the same subfolders outside, so a followed symlink would land
        (outside / f"run-{index}").mkdir()
    stop = tmp_path / "stop"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(workspace), str(stop)], stdout=subprocess.PIPE, text=True
    )
    written = refused = 0
    started = time.monotonic()
    try:
        # As the CLI does: the paths are checked first (before the evaluation) and written later, by which time a
        # folder may have been swapped for a symlink.
        targets = [resolve_output_path(f"out/run-{index}/report.json", workspace) for index in range(7)]
        time.sleep(0.05)  # let the swapping begin
        for index in range(WRITES):
            assert time.monotonic() - started < TIME_LIMIT_S, "race test exceeded its time bound"
            try:
                write_atomic(targets[index % 7], b'{"report": %d}\n' % index)
                written += 1
            except OutputPathError:
                refused += 1
            assert _files_under(outside) == [], f"write {index} left a file outside the workspace"
    finally:
        stop.touch()
        output, _ = swapper.communicate(timeout=30)
    swaps = int(output.strip() or 0)
    assert swaps > 0, "the swapper never swapped: the race was not exercised"
    assert written + refused == WRITES
    assert written > 0, "no write succeeded at all"
    assert _files_under(outside) == []
    # Whatever landed, landed inside, and no temporary file was left anywhere.
    leftovers = [p.name for p in workspace.rglob("*") if ".evalkit-tmp-" in p.name]
    assert leftovers == []
    reports = [p for p in workspace.rglob("report.json") if p.is_file() and not p.is_symlink()]
    assert reports, "no report exists inside the workspace"
    for report in reports:
        assert report.resolve().is_relative_to(workspace.resolve())


@pytest.mark.skipif(sys.platform != "linux", reason="the swap uses Linux rename semantics")
def test_env_variable_path_under_the_same_race(tmp_path: Path) -> None:
    """The environment-variable path goes through the same checks and writer as --output."""
    from evalkit.output import ENV_VAR, output_path_from_env

    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "out").mkdir()
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    stop = tmp_path / "stop"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(workspace), str(stop)], stdout=subprocess.PIPE, text=True
    )
    try:
        target = output_path_from_env({ENV_VAR: "out/r.json"}, workspace)
        assert target is not None
        time.sleep(0.05)
        for index in range(WRITES):
            with contextlib.suppress(OutputPathError):
                write_atomic(target, b"x" * (index + 1))
    finally:
        stop.touch()
        swapper.communicate(timeout=30)
    assert _files_under(outside) == []
    assert os.path.isdir(workspace / "out") or os.path.isdir(workspace / "link")
