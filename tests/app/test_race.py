"""A folder swapped for a symlink while evalkit writes: no byte may land outside the workspace.

A separate process exchanges a folder of the destination with a symlink to a folder outside the workspace in a
tight loop (``renameat2(RENAME_EXCHANGE)`` when the C library has it, otherwise rename and symlink), while this
process resolves and writes at least 200 reports through :func:`evalkit.common.output.write_atomic`. The swapper counts
only the swaps it made between the first and the last write, and the test requires some: a race that did not
happen proves nothing. Every write must either land inside the workspace or be refused with
:class:`~evalkit.common.output.OutputPathError` (counted; any other error fails the test); the outside folder must stay
empty. A hang fails the test through its timeout.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit.common.output import OutputPathError, resolve_output_path, write_atomic

WRITES = 200
TIME_LIMIT_S = 120
"""Per-test timeout; the writes take about a second."""

SWAPPER = r"""
import ctypes, os, sys, time
workspace, go, stop = sys.argv[1], sys.argv[2], sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
renameat2 = getattr(libc, "renameat2", None)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
real, link = os.path.join(workspace, "out"), os.path.join(workspace, "link")
hold = os.path.join(workspace, "hold")
swaps = 0
deadline = time.monotonic() + 120
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.0005)
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


class Swapper:
    """The attacker: a process that swaps ``out`` and ``link`` from :meth:`start` until :meth:`stop`."""

    def __init__(self, workspace: Path, control: Path) -> None:
        self.go, self.halt = control / "go", control / "stop"
        self.process = subprocess.Popen(
            [sys.executable, "-c", SWAPPER, str(workspace), str(self.go), str(self.halt)],
            stdout=subprocess.PIPE,
            text=True,
        )

    def start(self) -> None:
        self.go.touch()

    def stop(self) -> int:
        """Stop the swapping; the number of swaps made since :meth:`start`."""
        self.halt.touch()
        self.go.touch()  # a swapper still waiting for the start ends at once
        output, _ = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, "the swapper failed"
        return int(output.strip() or 0)


def _files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if not p.is_dir() or p.is_symlink()]


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    """ws/out (a folder) and ws/link (a symlink to the outside folder)."""
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "out").mkdir()
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    return workspace, outside


def _real_folder(workspace: Path) -> Path:
    """Whichever of ``out`` and ``link`` is the real folder after the swaps."""
    (real,) = [p for p in (workspace / "out", workspace / "link") if p.is_dir() and not p.is_symlink()]
    return real


def _write_all(targets: list[Path], outside: Path) -> tuple[int, list[OutputPathError], dict[Path, bytes]]:
    """Write WRITES reports round-robin; count the refusals and keep the last bytes written to each target."""
    written, refused, last = 0, [], {}
    for index in range(WRITES):
        target = targets[index % len(targets)]
        data = b'{"report": %d}\n' % index
        try:
            write_atomic(target, data)
        except OutputPathError as exc:  # the only acceptable failure; any other error fails the test
            refused.append(exc)
        else:
            written += 1
            last[target] = data
        assert _files_under(outside) == [], f"write {index} left a file outside the workspace"
    return written, refused, last


def _check_refusals(refused: list[OutputPathError]) -> None:
    for exc in refused:
        assert "symlink" in exc.reason, exc  # refused because of the swap, not for some other reason


@pytest.mark.timeout(TIME_LIMIT_S)
@pytest.mark.skipif(sys.platform != "linux", reason="the swap uses Linux rename semantics")
def test_symlink_swap_race_never_writes_outside_the_workspace(tmp_path: Path) -> None:
    workspace, outside = _workspace(tmp_path)
    for index in range(7):  # the attacker prepares the same subfolders outside, so a followed symlink would land
        (outside / f"run-{index}").mkdir()
    swapper = Swapper(workspace, tmp_path)
    try:
        # As the CLI does: the paths are checked first (before the evaluation) and written later, by which time a
        # folder may have been swapped for a symlink.
        targets = [resolve_output_path(f"out/run-{index}/report.json", workspace) for index in range(7)]
        swapper.start()
        written, refused, _ = _write_all(targets, outside)
    finally:
        swaps = swapper.stop()
    assert swaps > 0, "the swapper never swapped during the writes: the race was not exercised"
    assert written + len(refused) == WRITES
    assert written > 0, "no write succeeded at all"
    _check_refusals(refused)
    assert _files_under(outside) == []
    # Whatever landed, landed inside, and no temporary file was left anywhere.
    leftovers = [p.name for p in tmp_path.rglob("*") if ".evalkit-tmp-" in p.name]
    assert leftovers == []
    reports = [p for p in workspace.rglob("report.json") if p.is_file() and not p.is_symlink()]
    assert reports, "no report exists inside the workspace"
    for report in reports:
        assert report.resolve().is_relative_to(workspace.resolve())


@pytest.mark.timeout(TIME_LIMIT_S)
@pytest.mark.skipif(sys.platform != "linux", reason="the swap uses Linux rename semantics")
def test_env_variable_path_under_the_same_race(tmp_path: Path) -> None:
    """The environment-variable path goes through the same checks and writer as --output."""
    from evalkit.common.output import ENV_VAR, output_path_from_env

    workspace, outside = _workspace(tmp_path)
    swapper = Swapper(workspace, tmp_path)
    try:
        target = output_path_from_env({ENV_VAR: "out/r.json"}, workspace)
        assert target is not None
        swapper.start()
        written, refused, last = _write_all([target], outside)
    finally:
        swaps = swapper.stop()
    assert swaps > 0, "the swapper never swapped during the writes: the race was not exercised"
    assert written + len(refused) == WRITES
    assert written > 0, "no write succeeded at all"
    _check_refusals(refused)
    assert _files_under(outside) == []
    # The last report written is in the real folder, under whichever name the swaps left it.
    assert [p.name for p in _files_under(_real_folder(workspace))] == ["r.json"]
    assert (_real_folder(workspace) / "r.json").read_bytes() == last[target]


@pytest.mark.timeout(TIME_LIMIT_S)
@pytest.mark.skipif(sys.platform != "linux", reason="the swap uses Linux rename semantics")
def test_the_swapper_swaps_only_between_start_and_stop(tmp_path: Path) -> None:
    """The count the race tests rely on: nothing is swapped before the start, and swaps are counted after it."""
    workspace, _ = _workspace(tmp_path)
    swapper = Swapper(workspace, tmp_path)
    try:
        time.sleep(0.2)
        assert (workspace / "link").is_symlink() and not (workspace / "out").is_symlink()
        swapper.start()
        time.sleep(0.2)
    finally:
        swaps = swapper.stop()
    assert swaps > 0
