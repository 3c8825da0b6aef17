"""Signals during `evalkit run --output`: SIGINT and SIGTERM end cleanly, SIGKILL's leftovers are recognised later.

The CLI runs in a subprocess whose first ``os.fsync`` (of the report's temporary file) announces itself and then
sleeps, so the signal arrives while the temporary file exists: the worst moment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.common.output import is_stale_temp_name, write_atomic

from ..conftest import ROOT, TINY_DIR

SLOW_WRITE = r"""
import os, sys, time
real_fsync, calls = os.fsync, []
def slow_fsync(fd):
    if not calls:
        calls.append(fd)
        print("WRITING", flush=True)
        time.sleep(60)
    real_fsync(fd)
os.fsync = slow_fsync
from evalkit.app.cli import main
sys.exit(main(sys.argv[1:]))
"""
TIME_LIMIT_S = 120
HANG_S = 2 * TIME_LIMIT_S + 60
"""Timeout of each test: a child that never announces its write (or never exits) fails the test, not the run."""


def _start(workspace: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = ["run", "--fixture", str(TINY_DIR), "--runs", "1", "--no-gates", "--no-cache", "--output", "out/report.json"]
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITE, *argv],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_write(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:  # a run that never reaches the write is stopped by the test's hang guard
        if line.strip() == "WRITING":
            return
    pytest.fail(f"the run ended before writing: {process.wait()} {process.stderr.read() if process.stderr else ''}")


def _temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if ".evalkit-tmp-" in p.name]


@pytest.mark.timeout(HANG_S)
@pytest.mark.parametrize(
    ("signum", "code", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_signal_during_the_write_exits_cleanly_and_leaves_nothing(
    tmp_path: Path, signum: signal.Signals, code: int, word: str
) -> None:
    process = _start(tmp_path)
    _wait_for_write(process)
    assert _temp_files(tmp_path), "the temporary file should exist while the write is paused"
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=TIME_LIMIT_S)
    assert process.returncode == code
    assert "Traceback" not in stderr
    assert stderr.strip().count("\n") == 0, stderr  # one line
    assert word in stderr
    assert _temp_files(tmp_path) == []
    assert list(tmp_path.iterdir()) == []  # neither the report nor the folder created for it


@pytest.mark.timeout(HANG_S)
def test_sigint_before_any_write_prints_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # Ctrl-C while the fixture is being loaded (before anything is written).
    script = (
        "import os, signal, sys, time\nimport evalkit.app.cli as cli\nimport evalkit.app.cli.validate as validate\n"
        "def interrupted(*args, **kwargs):\n    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(5)\n"
        "validate.load_fixture = interrupted\nsys.exit(cli.main(['validate', sys.argv[1]]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(TINY_DIR)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIME_LIMIT_S,
    )
    assert result.returncode == 130
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == "evalkit: interrupted (SIGINT); nothing partial was written"


@pytest.mark.timeout(HANG_S)
def test_temp_file_left_by_sigkill_is_removed_by_the_next_write(tmp_path: Path) -> None:
    process = _start(tmp_path)
    _wait_for_write(process)
    process.kill()
    process.wait(timeout=TIME_LIMIT_S)
    left = _temp_files(tmp_path)
    assert len(left) == 1
    assert is_stale_temp_name(left[0].name)
    assert oct(left[0].stat().st_mode & 0o777) == oct(0o600)

    write_atomic(tmp_path / "out" / "other.json", b"{}\n")

    assert _temp_files(tmp_path) == []
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["other.json"]


def test_a_folder_is_swept_of_stale_temps_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listed: list[object] = []
    listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda folder: (listed.append(folder), listdir(folder))[1])
    for name in ("a.json", "b.json", "c.json"):
        write_atomic(tmp_path / "out" / name, b"{}\n")
    assert len(listed) == 1  # the first write lists the folder, the others do not
    write_atomic(tmp_path / "other" / "d.json", b"{}\n")
    assert len(listed) == 2  # another folder is swept at its first write


def test_temp_files_of_running_processes_and_other_names_are_kept(tmp_path: Path) -> None:
    live = tmp_path / f".r.json.evalkit-tmp-{os.getppid()}-0123456789abcdef.tmp"
    own = tmp_path / f".r.json.evalkit-tmp-{os.getpid()}-0123456789abcdef.tmp"
    unrelated = tmp_path / ".r.json.12345.tmp"
    for path in (live, own, unrelated):
        path.write_bytes(b"x")
    write_atomic(tmp_path / "r.json", b"new")
    assert live.exists() and own.exists() and unrelated.exists()
    assert not is_stale_temp_name(unrelated.name)


AMBUSH = r"""
import importlib.abc, os, signal, sys

class Ambush(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pandas":  # imported by the command, never by launching it
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        return None

sys.meta_path.insert(0, Ambush())
from evalkit.app.launch import main
sys.exit(main(["score", "--help"]))
"""


@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_while_the_command_is_starting_ends_cleanly(tmp_path: Path, name: str, code: int) -> None:
    """A signal while the command's modules are still being imported (the first half second) ends with the exit
    code and the one line of a signal later on: no traceback, no bare death by the signal."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", AMBUSH, name], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == code, done.stderr
    assert done.stderr.splitlines() == [
        f"evalkit: {'interrupted' if code == 130 else 'terminated'} ({name}); nothing partial was written"
    ]
    assert done.stdout == ""


SWALLOWING_AMBUSH = r"""
import importlib.abc, os, signal, sys, time

class Ambush(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pandas":
            try:  # like C code inside an import that clears whatever exception a signal handler raised
                os.kill(os.getpid(), getattr(signal, sys.argv[1]))
                time.sleep(0.05)
            except BaseException:
                pass
        return None

sys.meta_path.insert(0, Ambush())
from evalkit.app.launch import main
sys.exit(main(["score", "--help"]))
"""


@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_during_the_imports_is_not_lost_where_exceptions_are_swallowed(
    tmp_path: Path, name: str, code: int
) -> None:
    """While the command is imported, a signal is recorded rather than raised, so code that swallows exceptions
    cannot lose it: the command stops after the import instead of running to its end with exit 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SWALLOWING_AMBUSH, name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == code, done.stderr
    assert done.stdout == "", "the command ran after the signal"


def test_the_console_script_and_python_m_start_through_the_launcher() -> None:
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["evalkit"] == "evalkit.app.launch:main"
    assert "from evalkit.app.launch import main" in (ROOT / "evalkit" / "__main__.py").read_text(encoding="utf-8")


@pytest.mark.parametrize(("argv", "code"), [(["validate", "no-such-fixture"], 2), (["validate", str(TINY_DIR)], 0)])
def test_a_closed_stderr_or_stdout_does_not_change_the_exit_code(tmp_path: Path, argv: list[str], code: int) -> None:
    """``evalkit ... 2>&1 | head -1``: the reader is gone before the command's last line; the exit code still says
    what happened (the broken pipe ended a refusal with exit 1, a failed gate's code)."""
    read, write = os.pipe()
    os.close(read)  # nobody will read: every write to the pipe fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "evalkit.app.cli", *argv], stdout=write, stderr=write, cwd=tmp_path, timeout=120
        )
    finally:
        os.close(write)
    assert done.returncode == code


IGNORED_AMBUSH = r"""
import importlib.abc, os, signal, sys

signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job: the shell ignores SIGINT for it

class Ambush(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pandas":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Ambush())
from evalkit.app.launch import main
sys.exit(main(["score", "--help"]))
"""


def test_an_ignored_sigint_stays_ignored_while_the_command_starts(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", IGNORED_AMBUSH], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "usage: evalkit score" in done.stdout


def test_a_stopped_command_leaves_no_signal_recorded_for_what_follows() -> None:
    from evalkit.app.signals import with_signals
    from evalkit.common.interrupts import Terminated, signal_exception, terminated

    assert with_signals(lambda: terminated(signal.SIGTERM, None) or 0) == 143
    assert isinstance(signal_exception(), KeyboardInterrupt)  # not Terminated: that command is over
    assert not isinstance(signal_exception(), Terminated)
