"""Where a retained report may be written, and writing it safely, also while the folder changes underneath.

A report path comes from a user (a CLI flag, a notebook parameter or the ``GOODBUDDY_RETRIEVAL_EVAL_OUTPUT``
environment variable), so it is treated as untrusted: it must be a relative path that stays inside the
workspace, it may not traverse or land on a symlink, and it may not name a directory.

:func:`resolve_output_path` only *checks* (it creates nothing, so a refused run leaves the workspace as it found
it). :func:`write_atomic` then writes through directory file descriptors: it opens ``/`` (or the working directory
for a relative path) and walks each folder with ``O_DIRECTORY | O_NOFOLLOW``, creating missing folders relative
to their parent's descriptor, creates the temporary file with ``O_CREAT | O_EXCL | O_NOFOLLOW`` in the final
folder's descriptor and renames it there. A symlink swapped in for any folder at any moment is therefore never
followed: the write either lands in the real folder inside the workspace or is refused. What is not covered: a
process that *moves a real folder* out of the workspace (rather than swapping in a symlink) takes the file with it.

Interrupted writes leave no partial destination: the temporary file is removed on any exception, including
``KeyboardInterrupt`` and the exception :mod:`evalkit.app.cli` raises on SIGTERM. A temporary file left by a process
killed with SIGKILL is named ``.<name>.evalkit-tmp-<pid>-<token>.tmp`` and is removed by the next write into the
same folder once process ``<pid>`` no longer exists.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import NoReturn

__all__ = [
    "ENV_VAR",
    "TEMP_MARKER",
    "OutputPathError",
    "OutputWriteError",
    "is_stale_temp_name",
    "output_path_from_env",
    "refuse_input_overwrite",
    "refuse_non_empty_folder",
    "resolve_output_path",
    "write_atomic",
    "writers_in_turn",
]

ENV_VAR = "GOODBUDDY_RETRIEVAL_EVAL_OUTPUT"

_FILE_MODE = 0o644
_NAME_MAX = 255
"""Longest file name (in bytes) accepted in a path; Linux and macOS file systems allow 255."""
_PATH_MAX = 4096
TEMP_MARKER = ".evalkit-tmp-"
"""Marks evalkit's temporary files: ``.<name>.evalkit-tmp-<pid>-<token>.tmp``."""
_TEMP_NAME = re.compile(r"^\..*\.evalkit-tmp-([0-9]+)-[0-9a-f]{16}\.tmp$", re.DOTALL)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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
    if len(os.fsencode(requested)) > _PATH_MAX:
        raise OutputPathError(requested, f"path is too long (over {_PATH_MAX} bytes)")
    components = tuple(segment for segment in segments if segment not in ("", "."))
    for segment in components:
        if len(os.fsencode(segment)) > _NAME_MAX:
            raise OutputPathError(requested, f"a path component is too long (over {_NAME_MAX} bytes)")
    return components


class OutputWriteError(OSError):
    """Writing an output file failed (disk full, read-only folder, ...); the message names the requested file."""

    def __init__(self, requested: str, error: OSError) -> None:
        super().__init__(error.errno, error.strerror or str(error))
        self.requested = requested

    def __str__(self) -> str:
        return f"cannot write {self.requested!r}: {self.strerror}"


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


def _check_target_mode(requested: str, target: str, mode: int) -> None:
    if stat.S_ISLNK(mode):
        raise OutputPathError(requested, f"target {target!r} is a symlink (symlink destination)")
    if stat.S_ISDIR(mode):
        raise OutputPathError(requested, f"target {target!r} is an existing directory")
    if not stat.S_ISREG(mode):
        raise OutputPathError(requested, f"target {target!r} exists and is not a regular file")


def resolve_output_path(requested: str, workspace: Path) -> Path:
    """Resolve a user-requested report path relative to the workspace, refusing anything unsafe.

    Nothing is created: missing folders are created by :func:`write_atomic` at write time, through directory file
    descriptors, so a run refused later leaves no folder behind.

    Args:
        requested: a relative, ``/``-separated path naming a file, e.g. ``"reports/run-1.json"``.
        workspace: an existing directory; it is resolved with ``Path.resolve(strict=True)``, so a workspace
            that is itself reached through a symlink is fine.

    Returns:
        The absolute path of the file inside the resolved workspace (no component of it is a symlink).

    Raises:
        OutputPathError: naming `requested` and the rule it broke: empty; NUL byte; absolute (POSIX or
            Windows-looking); backslash; a ``..`` component or an escape from the workspace; a directory
            name (trailing ``/`` or ``.``); a name or path too long; an existing parent component that is a
            symlink or not a directory; a target that is a symlink (dangling or not), a directory or a special
            file; or a workspace that does not exist or is not a directory.
    """
    components = _split_components(requested)
    root = _resolve_workspace(requested, workspace)
    target = root.joinpath(*components)
    if not target.is_relative_to(root) or target == root:
        raise OutputPathError(requested, "path escapes the workspace")
    current = root
    for name in components[:-1]:
        current = current / name
        status = _lstat_or_none(requested, current)
        if status is None:
            return target  # The rest is created at write time.
        _check_parent(requested, current, status)
    status = _lstat_or_none(requested, target)
    if status is not None:
        _check_target_mode(requested, str(target), status.st_mode)
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


def _same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file: the same device and inode when both exist (symlinks followed, so a hard
    link or a symlink to an input matches), else the same real path (every symlinked folder resolved)."""
    try:
        one, other = os.stat(first), os.stat(second)
    except (OSError, ValueError):
        return os.path.realpath(first) == os.path.realpath(second)
    return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


def refuse_input_overwrite(target: Path, inputs: Iterable[Path], requested: str | None = None) -> None:
    """Refuse an output `target` that is one of the run's `inputs`, before anything is written.

    Both sides are compared as files, not as text: an existing target matches an input with the same device and
    inode (a hard link, a symlink to it, another spelling of its path); a target or input that does not exist yet
    matches by real path (symlinked folders resolved), so an output cannot create an input a later run reads
    (an absent ``aliases.json`` or ``gates.json`` of a fixture reached through a symlinked folder).

    Raises:
        OutputPathError: naming the requested output path and the input it would overwrite.
    """
    for source in inputs:
        if _same_file(Path(target), Path(source)):
            raise OutputPathError(
                requested or str(target), f"it is an input of this run ({source.name!r}) and would overwrite it"
            )


def refuse_non_empty_folder(requested: str, folder: Path) -> None:
    """Refuse an output folder that exists and holds anything (``OutputPathError`` naming `requested`): a new
    fixture never mixes with older files (another fixture's baselines.json or gates.json would be checked against
    it)."""
    try:
        status = folder.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(status.st_mode) or os.listdir(folder):
        raise OutputPathError(requested, "the output folder exists and is not empty: give a new or empty folder")


def is_stale_temp_name(name: str, alive: frozenset[int] = frozenset()) -> bool:
    """True when `name` is an evalkit temporary file whose writing process no longer exists.

    Process IDs in `alive` are treated as running (the current process is always treated as running).
    """
    match = _TEMP_NAME.match(name)
    if match is None:
        return False
    pid = int(match.group(1))
    if pid == os.getpid() or pid in alive:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def _display(path: Path) -> str:
    """`path` as shown in messages: relative to the working directory when inside it, else its name."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (OSError, ValueError):
        return path.name


class _Walk:
    """Open directory descriptors from an anchor down to one folder, creating missing folders on the way."""

    def __init__(self, requested: str) -> None:
        self.requested = requested
        self.fds: list[int] = []
        self.created: list[tuple[int, str]] = []  # (parent descriptor, name), in creation order

    @property
    def fd(self) -> int:
        return self.fds[-1]

    def open(self, path: Path) -> None:
        anchor = "/" if path.is_absolute() else "."
        parts = path.parts[1:] if path.is_absolute() else path.parts
        self.fds.append(os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        for name in parts:
            self.fds.append(self._step(name))

    def _step(self, name: str) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            pass
        except (NotADirectoryError, OSError) as exc:
            self._refuse_step(name, exc)
        try:
            os.mkdir(name, 0o777, dir_fd=self.fd)
            self.created.append((self.fd, name))
        except FileExistsError:
            pass  # Created concurrently; the O_NOFOLLOW open below decides whether it is acceptable.
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            self._refuse_step(name, exc)

    def _refuse_step(self, name: str, exc: OSError) -> NoReturn:
        if isinstance(exc, NotADirectoryError) or exc.errno == errno.ELOOP:
            raise OutputPathError(
                self.requested, f"folder {name!r} is a symlink or not a directory (possibly swapped during the write)"
            ) from None
        raise OutputWriteError(self.requested, exc) from None

    def remove_created(self) -> None:
        """Remove the folders this walk created (innermost first) when they are still empty."""
        for parent, name in reversed(self.created):
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=parent)

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)


_SWEPT: set[tuple[int, int]] = set()
"""The folders (device, inode) this process has swept of stale temporary files: each is swept once, at its first
write, since listing a folder at every write grew with the folder (2.6 ms a write into a folder of 8,000 files,
an embedding cache's, against 0.4 ms into an empty one)."""


def _remove_stale_temps(directory: int) -> None:
    """Remove temporary files left in the folder by evalkit processes that no longer exist (killed by SIGKILL), the
    first time this process writes into the folder."""
    with contextlib.suppress(OSError):
        folder = os.fstat(directory)
        if (folder.st_dev, folder.st_ino) in _SWEPT:
            return
        _SWEPT.add((folder.st_dev, folder.st_ino))
        for name in os.listdir(directory):
            if TEMP_MARKER in name and is_stale_temp_name(name):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=directory)


def _temp_name(name: str) -> str:
    stem = os.fsdecode(os.fsencode(name)[:120]) if len(os.fsencode(name)) > 120 else name
    return f".{stem}{TEMP_MARKER}{os.getpid()}-{secrets.token_hex(8)}.tmp"


def _write_into(directory: int, name: str, data: bytes, durable: bool) -> None:
    """Write a new temporary file in `directory` (never following a symlink) and rename it onto `name`; with
    `durable`, fsync the file before the rename and the folder after it."""
    temp = _temp_name(name)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=directory)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
            os.fchmod(fd, _FILE_MODE)
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=directory)
        raise
    if durable:
        with contextlib.suppress(OSError):
            os.fsync(directory)  # best effort: the rename survives a crash (not all systems allow it)


def write_atomic(path: Path, data: bytes, durable: bool = True) -> None:
    """Write `data` to `path` atomically through directory file descriptors, leaving nothing partial behind.

    Every folder of `path` is opened with ``O_NOFOLLOW`` relative to its parent's descriptor (from ``/`` for an
    absolute path, from the working directory for a relative one) and missing folders are created the same way,
    so a symlink swapped in at any moment is refused rather than followed. The data goes to
    ``.<name>.evalkit-tmp-<pid>-<token>.tmp`` (``O_CREAT | O_EXCL | O_NOFOLLOW``) in the final folder, is flushed
    and fsynced, gets mode ``0o644`` and is renamed onto `path` relative to the same descriptor: readers see either
    the old file or the complete new one. On any failure (also ``KeyboardInterrupt``) the temporary file and the
    folders this call created are removed and the exception re-raised; OS errors become :class:`OutputWriteError`
    naming `path`. Stale temporary files of dead evalkit processes in the folder are removed first, at this
    process's first write into the folder.

    ``durable=False`` leaves out the two fsyncs (of the file and of the folder): the write is as atomic for other
    processes and under interruption, but a power cut or a crash of the system may leave the old file, none, or
    an empty or truncated one. Only for files that are checked when read and can be made again (the embedding
    cache's entries): two fsyncs cost about 4 ms, which each new query's cache entry paid inside a timed search.

    Call :func:`resolve_output_path` first for a user-supplied path: this function refuses symlinked folders
    but does not apply the workspace rules. A symlink or special file at the target itself is replaced by the
    rename, never written through.

    Raises:
        OutputPathError: a folder of `path` is (or became) a symlink or not a directory.
        OutputWriteError: the file system refused the write (disk full, read-only, permissions).
    """
    path = Path(path)
    requested = _display(path)
    walk = _Walk(requested)
    done = False
    try:
        walk.open(path.parent)
        _remove_stale_temps(walk.fd)
        _write_into(walk.fd, path.name, data, durable)
        done = True
    except OutputPathError:
        raise
    except OSError as exc:
        if isinstance(exc, OutputWriteError):
            raise
        raise OutputWriteError(requested, exc) from exc
    finally:
        if not done:
            walk.remove_created()
        walk.close()


@contextlib.contextmanager
def writers_in_turn(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock (``flock``) on `folder` for the ``with`` block, so that processes that read a file
    of the folder, change it and write it back atomically (two notebooks of one reviewer on one label file) take
    turns: each reads what the other wrote before it writes, and no write is lost. The lock is released when the
    block ends, also by an exception or when the process dies. Nothing is locked while the folder does not exist
    yet (the first write creates it)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        descriptor = -1
    try:
        if descriptor >= 0:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        if descriptor >= 0:
            os.close(descriptor)  # closing the last descriptor of the open folder releases the lock
