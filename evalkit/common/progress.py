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
from typing import TypeVar

T = TypeVar("T")

ENV_VAR = "EVALKIT_PROGRESS"


def progress_enabled() -> bool:
    """Whether bars are shown: forced by ``EVALKIT_PROGRESS``, else on a terminal outside CI."""
    forced = os.environ.get(ENV_VAR)
    if forced in ("0", "1"):
        return forced == "1"
    return not os.environ.get("CI") and sys.stderr.isatty()


def progress(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """``items``, with a bar labelled ``description`` when bars are enabled (see the module docstring)."""
    if not progress_enabled():
        yield from items
        return
    from tqdm import tqdm

    yield from tqdm(items, desc=description, total=total, leave=False, unit="it", dynamic_ncols=True)
