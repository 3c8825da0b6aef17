"""Progress bars for long work, shown only to a person watching a terminal.

A bar (tqdm, on stderr) appears when stderr is a terminal and the ``CI`` environment variable is unset; in CI,
in a pipe, in papermill and nbval runs (whose stderr is no terminal) and in tests the iterable is returned as it
is, so nothing is printed and committed notebook outputs never hold a bar. ``EVALKIT_PROGRESS=0`` turns bars off,
``EVALKIT_PROGRESS=1`` forces them on. Like :mod:`evalkit.common.output`, this is a leaf utility that any layer may use.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Protocol, TypeVar

T = TypeVar("T")

ENV_VAR = "EVALKIT_PROGRESS"


def progress_enabled() -> bool:
    """Whether bars are shown: forced by ``EVALKIT_PROGRESS``, else on a terminal outside CI."""
    forced = os.environ.get(ENV_VAR)
    if forced in ("0", "1"):
        return forced == "1"
    return not os.environ.get("CI") and sys.stderr.isatty()


__all__ = ["ENV_VAR", "Meter", "meter", "progress", "progress_enabled"]


def progress(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """``items``, with a bar labelled ``description`` when bars are enabled (see the module docstring)."""
    if not progress_enabled():
        yield from items
        return
    from tqdm import tqdm

    yield from tqdm(items, desc=description, total=total, leave=False, unit="it", dynamic_ncols=True)


class Meter(Protocol):
    """What :func:`meter` yields: ``update(n)`` counts ``n`` more units of work done."""

    def update(self, n: int) -> object: ...


class _Quiet:
    def update(self, n: int) -> None:
        pass


@contextmanager
def meter(description: str, unit: str, total: int | None = None) -> Iterator[Meter]:
    """A bar for work counted as it is done (lines read, not items iterated), labelled ``description`` and counted
    in ``unit`` (``total``: how many are expected, None when unknown); a meter that shows nothing when bars are not
    enabled (see the module docstring)."""
    if not progress_enabled():
        yield _Quiet()
        return
    from tqdm import tqdm

    with tqdm(desc=description, total=total, leave=False, unit=unit, unit_scale=True, dynamic_ncols=True) as bar:
        yield bar
