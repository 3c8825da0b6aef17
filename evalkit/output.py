"""Where a retained report may be written, and writing it safely.

A report path comes from a user (a CLI flag, a notebook parameter or the ``GOODBUDDY_RETRIEVAL_EVAL_OUTPUT``
environment variable), so it is treated as untrusted: it must be a relative path that stays inside the
workspace, it may not traverse or land on a symlink, and it may not name a directory. Missing parent
directories are created one level at a time, each re-checked after creation.

The checks narrow, but cannot close, the window between checking a path and writing to it: a process that
can rewrite the workspace concurrently can still race them. They protect against mistakes and hostile
*input*, not against a hostile co-tenant of the workspace.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath

__all__ = ["ENV_VAR", "OutputPathError", "output_path_from_env", "resolve_output_path", "write_atomic"]

ENV_VAR = "GOODBUDDY_RETRIEVAL_EVAL_OUTPUT"

_FILE_MODE = 0o644


class OutputPathError(ValueError):
    """A requested output path is unsafe or invalid; message names the path and the reason."""

    def __init__(self, requested: str, reason: str) -> None:
        self.requested = requested
        self.reason = reason
        super().__init__(f"refusing output path {requested!r}: {reason}")


def _split_components(requested: str) -> tuple[str, ...]:
    """Check `requested` lexically and return its meaningful components (no ``.``, no empty segments).

    Refuses: empty text, NUL bytes, text the file system cannot encode, absolute POSIX or Windows paths,
    backslashes (an ambiguous separator), ``..`` components, and paths that name a directory (trailing
    ``/`` or ``.``, or nothing but ``.`` segments).
    """
    if not requested:
        raise OutputPathError(requested, "path is empty")
    if "\0" in requested:
        raise OutputPathError(requested, "path contains a NUL byte")
    try:
        os.fsencode(requested)
    except UnicodeEncodeError as exc:
        raise OutputPathError(requested, "path cannot be encoded for the file system") from exc
    if PurePosixPath(requested).is_absolute():
        raise OutputPathError(requested, "absolute paths are not allowed; give a path relative to the workspace")
    if PureWindowsPath(requested).anchor:
        raise OutputPathError(requested, "Windows absolute or drive paths are not allowed")
    if "\\" in requested:
        raise OutputPathError(requested, "backslashes are not allowed; use '/' as the separator")
    segments = requested.split("/")
    if ".." in segments:
        raise OutputPathError(requested, "'..' components are not allowed (they could escape the workspace)")
    if segments[-1] in ("", "."):
        raise OutputPathError(requested, "path names a directory, not a file")
    return tuple(segment for segment in segments if segment not in ("", "."))


def _resolve_workspace(requested: str, workspace: Path) -> Path:
    """Resolve `workspace` strictly; it must exist and be a directory."""
    try:
        root = workspace.resolve(strict=True)
    except OSError as exc:
        raise OutputPathError(requested, f"workspace {str(workspace)!r} cannot be resolved: {exc}") from exc
    if not root.is_dir():
        raise OutputPathError(requested, f"workspace {str(root)!r} is not a directory")
    return root


def _lstat_or_none(requested: str, path: Path) -> os.stat_result | None:
    """``lstat`` that returns None for a missing path and turns other OS errors into OutputPathError."""
    try:
        return path.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OutputPathError(requested, f"cannot inspect {str(path)!r}: {exc.strerror or exc}") from exc


def _check_parent(requested: str, path: Path, status: os.stat_result) -> None:
    """Refuse a parent component that is a symlink or not a directory."""
    if stat.S_ISLNK(status.st_mode):
        raise OutputPathError(requested, f"parent component {str(path)!r} is a symlink (symlink traversal)")
    if not stat.S_ISDIR(status.st_mode):
        raise OutputPathError(requested, f"parent component {str(path)!r} exists and is not a directory")


def _ensure_parent_dir(requested: str, path: Path) -> None:
    """Make sure `path` is a real directory (not a symlink), creating it if missing."""
    status = _lstat_or_none(requested, path)
    if status is None:
        try:
            path.mkdir()
        except FileExistsError:
            pass  # Created concurrently; the re-check below decides whether it is acceptable.
        except OSError as exc:
            raise OutputPathError(requested, f"cannot create directory {str(path)!r}: {exc.strerror}") from exc
        status = _lstat_or_none(requested, path)
        if status is None:
            raise OutputPathError(requested, f"directory {str(path)!r} vanished after creation")
    _check_parent(requested, path, status)


def _check_target(requested: str, target: Path) -> None:
    """Refuse a final target that exists and is a symlink (even dangling), a directory or a special file."""
    status = _lstat_or_none(requested, target)
    if status is None:
        return
    if stat.S_ISLNK(status.st_mode):
        raise OutputPathError(requested, f"target {str(target)!r} is a symlink (symlink destination)")
    if stat.S_ISDIR(status.st_mode):
        raise OutputPathError(requested, f"target {str(target)!r} is an existing directory")
    if not stat.S_ISREG(status.st_mode):
        raise OutputPathError(requested, f"target {str(target)!r} exists and is not a regular file")


def resolve_output_path(requested: str, workspace: Path) -> Path:
    """Resolve a user-requested report path relative to the workspace, refusing anything unsafe.

    Args:
        requested: a relative, ``/``-separated path naming a file, e.g. ``"reports/run-1.json"``.
        workspace: an existing directory; it is resolved with ``Path.resolve(strict=True)``, so a workspace
            that is itself reached through a symlink is fine.

    Returns:
        The absolute path of the file inside the resolved workspace. Missing parent directories have been
        created (one level at a time, each re-checked not to be a symlink); the file itself is not created.

    Raises:
        OutputPathError: naming `requested` and the rule it broke: empty; NUL byte; absolute (POSIX or
            Windows-looking); backslash; a ``..`` component or an escape from the workspace; a directory
            name (trailing ``/`` or ``.``); a parent component that is a symlink or not a directory; a
            target that is a symlink (dangling or not), a directory or a special file; or a workspace that
            does not exist or is not a directory.
    """
    components = _split_components(requested)
    root = _resolve_workspace(requested, workspace)
    current = root
    for name in components[:-1]:
        current = current / name
        _ensure_parent_dir(requested, current)
    target = current / components[-1]
    if not target.is_relative_to(root) or target == root:
        raise OutputPathError(requested, "path escapes the workspace")
    _check_target(requested, target)
    return target


def output_path_from_env(environ: Mapping[str, str], workspace: Path) -> Path | None:
    """The resolved path from ``ENV_VAR`` in `environ` (None when unset or empty). No global os.environ reads.

    Args:
        environ: the environment to read, passed explicitly (e.g. ``os.environ`` at the CLI boundary).
        workspace: the workspace the path is resolved against (see `resolve_output_path`).

    Raises:
        OutputPathError: when the variable is set to an unsafe path.
    """
    requested = environ.get(ENV_VAR, "")
    if not requested:
        return None
    return resolve_output_path(requested, workspace)


def _fsync_directory(directory: Path) -> None:
    """Best-effort fsync of a directory so a completed rename survives a crash (not all systems allow it)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, leaving no partial file behind on any failure.

    Writes to a temporary file in the same directory, flushes and fsyncs it, then ``os.replace``s it onto
    `path`; on any failure the temporary file is removed and the exception re-raised.

    The temporary file is ``.<name>.<random>.tmp`` next to `path`, so the final ``os.replace`` is an
    atomic rename on the same file system: readers see either the old file or the complete new one. The
    written file has mode ``0o644``. Call `resolve_output_path` first; this function does not re-validate
    `path`.
    """
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            os.fchmod(handle.fileno(), _FILE_MODE)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    _fsync_directory(path.parent)
