"""Tests for evalkit.common.output: safe report paths and atomic writes."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.common.output import (
    ENV_VAR,
    OutputPathError,
    OutputWriteError,
    output_path_from_env,
    refuse_input_overwrite,
    resolve_output_path,
    write_atomic,
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace directory with a sibling `outside` directory to detect escapes."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "outside").mkdir()
    return ws


def _refusal(requested: str, workspace: Path, reason_fragment: str) -> OutputPathError:
    """Assert `requested` is refused with a message naming the path and containing `reason_fragment`."""
    with pytest.raises(OutputPathError) as info:
        resolve_output_path(requested, workspace)
    message = str(info.value)
    assert repr(requested) in message
    assert reason_fragment in message
    return info.value


# --- lexical rules ---------------------------------------------------------------------------------------


def test_empty_path_is_refused(workspace: Path) -> None:
    _refusal("", workspace, "empty")


@pytest.mark.parametrize("requested", ["a\0b.json", "\0", "dir/\0/x.json"])
def test_nul_byte_is_refused(workspace: Path, requested: str) -> None:
    _refusal(requested, workspace, "NUL")


@pytest.mark.parametrize("requested", ["/x", "/etc/passwd", "//server/share/x.json", "/"])
def test_posix_absolute_path_is_refused(workspace: Path, requested: str) -> None:
    _refusal(requested, workspace, "absolute")


@pytest.mark.parametrize("requested", ["C:\\x", "C:/x.json", "c:x.json", "\\\\server\\share\\x", "\\x"])
def test_windows_absolute_path_is_refused(workspace: Path, requested: str) -> None:
    _refusal(requested, workspace, "Windows")


def test_backslash_is_refused_as_ambiguous_separator(workspace: Path) -> None:
    _refusal("a\\..\\..\\x.json", workspace, "backslash")
    assert list(workspace.iterdir()) == []


@pytest.mark.parametrize("requested", ["../x", "a/../../x", "..", "a/..", "a/b/../../../outside/x"])
def test_escaping_dotdot_is_refused(workspace: Path, requested: str) -> None:
    _refusal(requested, workspace, "'..'")
    assert list(workspace.iterdir()) == []
    assert list((workspace.parent / "outside").iterdir()) == []


def test_non_escaping_dotdot_is_refused_too(workspace: Path) -> None:
    # Policy: any '..' component is refused, even one that would stay inside the workspace.
    _refusal("a/../x.json", workspace, "'..'")


@pytest.mark.parametrize("requested", ["reports/", "reports/.", ".", "./", "a//"])
def test_path_naming_a_directory_is_refused(workspace: Path, requested: str) -> None:
    _refusal(requested, workspace, "names a directory")


def test_unencodable_path_is_refused(workspace: Path) -> None:
    _refusal("\ud800x.json", workspace, "encoded")


def test_overlong_name_is_refused_not_crashed(workspace: Path) -> None:
    _refusal("x" * 300, workspace, "too long")


# --- workspace ---------------------------------------------------------------------------------------------


def test_missing_workspace_is_refused(tmp_path: Path) -> None:
    _refusal("x.json", tmp_path / "missing", "cannot be resolved")


def test_workspace_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file_ws = tmp_path / "file"
    file_ws.write_text("not a dir")
    _refusal("x.json", file_ws, "not a directory")


def test_workspace_reached_through_symlink_resolves_to_real_directory(workspace: Path) -> None:
    link = workspace.parent / "ws-link"
    link.symlink_to(workspace, target_is_directory=True)
    assert resolve_output_path("r.json", link) == workspace.resolve() / "r.json"


# --- happy paths -------------------------------------------------------------------------------------------


def test_simple_name_resolves_inside_workspace(workspace: Path) -> None:
    result = resolve_output_path("report.json", workspace)
    assert result == workspace.resolve() / "report.json"
    assert result.is_absolute()
    assert not result.exists()


def test_nested_missing_directories_are_created_by_the_write_not_the_check(workspace: Path) -> None:
    result = resolve_output_path("reports/2024/run-1/out.json", workspace)
    root = workspace.resolve()
    assert result == root / "reports" / "2024" / "run-1" / "out.json"
    assert list(workspace.iterdir()) == []  # checking creates nothing
    write_atomic(result, b"x")
    for directory in (root / "reports", root / "reports/2024", root / "reports/2024/run-1"):
        assert directory.is_dir()
        assert not directory.is_symlink()
    assert result.read_bytes() == b"x"


def test_dot_and_empty_segments_are_ignored(workspace: Path) -> None:
    assert resolve_output_path("./a/.//b/./c.json", workspace) == workspace.resolve() / "a" / "b" / "c.json"


def test_tilde_is_a_literal_name_not_home(workspace: Path) -> None:
    assert resolve_output_path("~/x.json", workspace) == workspace.resolve() / "~" / "x.json"


def test_existing_regular_target_is_allowed(workspace: Path) -> None:
    (workspace / "old.json").write_text("{}")
    assert resolve_output_path("old.json", workspace) == workspace.resolve() / "old.json"


# --- file-system rules -------------------------------------------------------------------------------------


def test_symlinked_parent_pointing_outside_is_refused(workspace: Path) -> None:
    outside = workspace.parent / "outside"
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    _refusal("link/sub/report.json", workspace, "symlink traversal")
    assert list(outside.iterdir()) == []


def test_symlinked_parent_pointing_inside_is_refused(workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "alias").symlink_to(workspace / "real", target_is_directory=True)
    _refusal("alias/report.json", workspace, "symlink traversal")


def test_deep_symlinked_parent_is_refused_and_nothing_created_beyond_it(workspace: Path) -> None:
    outside = workspace.parent / "outside"
    (workspace / "a").mkdir()
    (workspace / "a" / "link").symlink_to(outside, target_is_directory=True)
    _refusal("a/link/b/c/report.json", workspace, "symlink traversal")
    assert list(outside.iterdir()) == []


def test_parent_component_that_is_a_file_is_refused(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("hello")
    _refusal("notes.txt/report.json", workspace, "not a directory")


def test_symlink_at_target_is_refused(workspace: Path) -> None:
    victim = workspace.parent / "outside" / "victim.txt"
    victim.write_text("keep me")
    (workspace / "report.json").symlink_to(victim)
    _refusal("report.json", workspace, "symlink destination")
    assert victim.read_text() == "keep me"


def test_dangling_symlink_at_target_is_refused(workspace: Path) -> None:
    (workspace / "report.json").symlink_to(workspace.parent / "outside" / "does-not-exist")
    _refusal("report.json", workspace, "symlink destination")
    assert not (workspace.parent / "outside" / "does-not-exist").exists()


def test_target_that_is_a_directory_is_refused(workspace: Path) -> None:
    (workspace / "reports").mkdir()
    _refusal("reports", workspace, "is an existing directory")


def test_target_that_is_a_fifo_is_refused(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    _refusal("pipe", workspace, "not a regular file")


def test_parent_replaced_by_symlink_after_the_check_is_refused_by_the_write(workspace: Path) -> None:
    # The race: the path is checked, then a folder is swapped for a symlink before the write.
    outside = workspace.parent / "outside"
    target = resolve_output_path("new/report.json", workspace)
    (workspace / "new").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OutputPathError, match="symlink"):
        write_atomic(target, b"data")
    assert list(outside.iterdir()) == []


def test_mkdir_failure_becomes_output_write_error_naming_the_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = resolve_output_path("new/report.json", workspace)

    def failing_mkdir(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "mkdir", failing_mkdir)
    with pytest.raises(OutputWriteError, match=r"cannot write '(new/)?report.json': Permission denied") as info:
        write_atomic(target, b"data")
    assert "Errno" not in str(info.value)
    assert list(workspace.iterdir()) == []


# --- environment variable ----------------------------------------------------------------------------------


def test_env_var_name() -> None:
    assert ENV_VAR == "GOODBUDDY_RETRIEVAL_EVAL_OUTPUT"


def test_env_unset_gives_none(workspace: Path) -> None:
    assert output_path_from_env({}, workspace) is None


def test_env_empty_gives_none(workspace: Path) -> None:
    assert output_path_from_env({ENV_VAR: ""}, workspace) is None


def test_env_set_resolves_path(workspace: Path) -> None:
    result = output_path_from_env({ENV_VAR: "out/r.json", "OTHER": "/etc/passwd"}, workspace)
    assert result == workspace.resolve() / "out" / "r.json"


def test_env_unsafe_value_is_refused(workspace: Path) -> None:
    with pytest.raises(OutputPathError, match="absolute"):
        output_path_from_env({ENV_VAR: "/tmp/x.json"}, workspace)


def test_env_reads_only_the_given_mapping(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "from-os-environ.json")
    assert output_path_from_env({}, workspace) is None


# --- write_atomic ------------------------------------------------------------------------------------------


def test_write_atomic_writes_data_with_mode_0644_and_no_temp(workspace: Path) -> None:
    target = workspace / "report.json"
    write_atomic(target, b'{"ok": true}\n')
    assert target.read_bytes() == b'{"ok": true}\n'
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in workspace.iterdir()) == ["report.json"]


def test_write_atomic_mode_ignores_restrictive_umask(workspace: Path) -> None:
    old_umask = os.umask(0o077)
    try:
        write_atomic(workspace / "r.json", b"x")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((workspace / "r.json").stat().st_mode) == 0o644


def test_write_atomic_empty_data(workspace: Path) -> None:
    write_atomic(workspace / "empty.json", b"")
    assert (workspace / "empty.json").read_bytes() == b""


def test_write_atomic_replaces_existing_target_by_rename(workspace: Path) -> None:
    target = workspace / "report.json"
    target.write_bytes(b"old")
    witness = workspace.parent / "outside" / "hardlink"
    os.link(target, witness)
    old_inode = target.stat().st_ino

    write_atomic(target, b"new")

    assert target.read_bytes() == b"new"
    # A rename swaps in a new inode; an in-place rewrite would have changed the hard link's content too.
    assert target.stat().st_ino != old_inode
    assert witness.read_bytes() == b"old"
    assert sorted(p.name for p in workspace.iterdir()) == ["report.json"]


def test_write_atomic_temp_file_is_hidden_sibling(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Path] = []
    real_replace = os.replace

    def recording_replace(src: str, dst: str, **kwargs: int) -> None:
        seen.append(workspace / src)
        assert (workspace / src).read_bytes() == b"data"  # fully written before the rename
        real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", recording_replace)
    target = workspace / "report.json"
    write_atomic(target, b"data")
    assert len(seen) == 1
    assert seen[0].parent == workspace
    assert seen[0].name.startswith(".report.json.")
    assert seen[0].name.endswith(".tmp")
    assert not seen[0].exists()


@pytest.mark.parametrize("error", [OSError("disk full"), KeyboardInterrupt()])
def test_write_atomic_failed_replace_leaves_no_temp_and_no_target(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    def failing_replace(src: str, dst: str, **kwargs: int) -> None:
        raise error

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(type(error)):
        write_atomic(workspace / "report.json", b"data")
    assert list(workspace.iterdir()) == []


def test_write_atomic_failed_fsync_keeps_existing_target(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = workspace / "report.json"
    target.write_bytes(b"old")

    def failing_fsync(fd: int) -> None:
        raise OSError("I/O error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="I/O error"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in workspace.iterdir()) == ["report.json"]


def test_write_atomic_failure_removes_the_folders_it_created(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OutputWriteError, match="No space left on device"):
        write_atomic(workspace / "missing" / "deeper" / "r.json", b"x")
    assert list(workspace.iterdir()) == []


def test_resolve_then_write_round_trip(workspace: Path) -> None:
    path = resolve_output_path("reports/run/r.json", workspace)
    write_atomic(path, b"payload")
    assert (workspace / "reports" / "run" / "r.json").read_bytes() == b"payload"


# --- properties --------------------------------------------------------------------------------------------


@contextmanager
def _fresh_workspace() -> Iterator[Path]:
    """A new workspace per hypothesis example (tmp_path is function-scoped and shared across examples)."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        yield ws


_SAFE_SEGMENT = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~ ", min_size=1, max_size=12
).filter(lambda s: s not in (".", ".."))
_SAFE_SEGMENTS = st.lists(_SAFE_SEGMENT, min_size=1, max_size=5)

_PIECES = st.sampled_from(["a", "b", "..", ".", "", "/", "\\", "C:", "\0", "~", " ", "x.json", "//"])
_HOSTILE_TEXT = st.one_of(st.text(max_size=40), st.lists(_PIECES, max_size=8).map("".join))


@settings(max_examples=80, deadline=None)
@given(segments=_SAFE_SEGMENTS)
def test_property_safe_relative_paths_resolve_inside(segments: list[str]) -> None:
    with _fresh_workspace() as ws:
        result = resolve_output_path("/".join(segments), ws)
        assert result.is_relative_to(ws.resolve())
        assert result == ws.resolve().joinpath(*segments)
        assert list(ws.iterdir()) == []  # the check creates nothing


@settings(max_examples=150, deadline=None)
@given(requested=_HOSTILE_TEXT)
def test_property_arbitrary_text_resolves_inside_or_is_refused(requested: str) -> None:
    with _fresh_workspace() as ws:
        try:
            result = resolve_output_path(requested, ws)
        except OutputPathError as exc:
            assert repr(requested) in str(exc)
        else:
            assert result.is_absolute()
            assert result.is_relative_to(ws.resolve())
            assert result != ws.resolve()
        assert list(ws.parent.iterdir()) == [ws]  # nothing created beside the workspace


@settings(max_examples=60, deadline=None)
@given(
    prefix=st.lists(_SAFE_SEGMENT, max_size=3),
    extra_ups=st.integers(min_value=1, max_value=3),
    suffix=st.lists(_SAFE_SEGMENT, min_size=1, max_size=3),
)
def test_property_escaping_dotdot_is_refused(prefix: list[str], extra_ups: int, suffix: list[str]) -> None:
    requested = "/".join([*prefix, *([".."] * (len(prefix) + extra_ups)), *suffix])
    with _fresh_workspace() as ws:
        with pytest.raises(OutputPathError, match=re.escape("'..'")):
            resolve_output_path(requested, ws)
        assert list(ws.iterdir()) == []
        assert list(ws.parent.iterdir()) == [ws]


# --- outputs onto inputs ---------------------------------------------------------------------------------


def _refuses_overwrite(target: Path, source: Path) -> None:
    with pytest.raises(OutputPathError, match=r"'out': it is an input of this run"):
        refuse_input_overwrite(target, [source], "out")


def test_input_overwrite_refuses_the_same_path_spelled_otherwise(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "in.json").write_text("{}", encoding="utf-8")
    _refuses_overwrite(workspace / "in.json", workspace / "sub" / ".." / "." / "in.json")


def test_input_overwrite_refuses_a_hard_link_of_an_input(workspace: Path) -> None:
    (workspace / "in.json").write_text("{}", encoding="utf-8")
    os.link(workspace / "in.json", workspace / "link.json")
    _refuses_overwrite(workspace / "link.json", workspace / "in.json")


def test_input_overwrite_refuses_the_target_of_a_symlinked_input(workspace: Path) -> None:
    (workspace / "real.json").write_text("{}", encoding="utf-8")
    (workspace / "in.json").symlink_to("real.json")
    _refuses_overwrite(workspace / "real.json", workspace / "in.json")


def test_input_overwrite_refuses_an_absent_input_reached_through_a_symlinked_folder(workspace: Path) -> None:
    (workspace / "fixture").mkdir()
    (workspace / "link").symlink_to("fixture")
    # gates.json does not exist yet: writing it would hand the next run a report as its gates
    _refuses_overwrite(workspace / "fixture" / "gates.json", workspace / "link" / "gates.json")


def test_input_overwrite_allows_another_file(workspace: Path) -> None:
    (workspace / "in.json").write_text("{}", encoding="utf-8")
    (workspace / "copy.json").write_text("{}", encoding="utf-8")
    refuse_input_overwrite(workspace / "copy.json", [workspace / "in.json", workspace / "absent.json"], "copy.json")
    refuse_input_overwrite(workspace / "new.json", [workspace / "in.json", workspace], "new.json")


@pytest.mark.parametrize(("durable", "fsyncs"), [(True, 2), (False, 0)])
def test_a_durable_write_fsyncs_the_file_and_the_folder_and_a_plain_one_neither(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, durable: bool, fsyncs: int
) -> None:
    calls: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    target = workspace / "sub" / "entry.npy"
    write_atomic(target, b"one", durable=durable)
    write_atomic(target, b"two", durable=durable)
    assert target.read_bytes() == b"two"
    assert len(calls) == 2 * fsyncs
    assert [p.name for p in target.parent.iterdir()] == ["entry.npy"]  # no temporary file left either way
