"""Ordinary memory pages for numpy's large arrays while a run file is scored.

numpy asks the kernel for transparent huge pages (``madvise``) for every array of 4 MiB or more. On a machine
whose kernel compacts memory on demand for such requests (``/sys/kernel/mm/transparent_hugepage/defrag`` set to
``madvise``, as on this project's virtual development machines), first touching those arrays can cost more than
the work done on them: scoring a 10-million-line run took 2.65-2.85 s with huge pages and 2.0-2.2 s without, one
thread, in alternating fresh processes (see ``benchmarks/RESULTS.md``). That figure is from one kind of machine;
on others huge pages may be neutral or help, so the setting is only evalkit's default:

- :func:`small_pages` turns numpy's request off for the duration of a ``with`` block and restores the previous
  setting afterwards (numpy's flag is process-wide, so other threads' arrays made meanwhile get ordinary pages
  too);
- when ``NUMPY_MADVISE_HUGEPAGE`` is set in the environment, numpy's own switch, the user has chosen, and nothing
  is changed;
- with a numpy that lacks the switch, nothing is changed.

Like :mod:`evalkit.common.output`, this is a leaf utility that any layer may use.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

__all__ = ["ENV_VAR", "small_pages"]

ENV_VAR = "NUMPY_MADVISE_HUGEPAGE"


def _switch() -> Callable[[bool], bool] | None:
    """numpy's process-wide huge-page switch (it returns the previous setting), or None."""
    core = getattr(np, "_core", None)
    multiarray = getattr(core, "multiarray", None)
    switch: Callable[[bool], bool] | None = getattr(multiarray, "_set_madvise_hugepage", None)
    return switch


@contextmanager
def small_pages() -> Iterator[None]:
    """Inside the block, numpy does not ask for transparent huge pages (see the module docstring)."""
    switch = _switch()
    if switch is None or ENV_VAR in os.environ:
        yield
        return
    previous = switch(False)
    try:
        yield
    finally:
        switch(previous)
