"""How memory is asked for while a run file is scored: ordinary pages for numpy, jemalloc for Arrow.

Scoring 10 million run lines first touches some 600 MB in a fresh process, and on this project's virtual
development machines first touching memory is what costs most after the parse itself. Two defaults, measured
there (``benchmarks/RESULTS.md``, "Scoring run files against qrels"), hold while :func:`scoring_memory` is active:

- numpy does not ask the kernel for transparent huge pages for its large arrays. With huge pages (and the
  kernel's ``defrag`` set to ``madvise``) one thread scored in 2.65-2.85 s, without them in 2.02-2.20 s.
- Arrow allocates from jemalloc (the system allocator where pyarrow has no jemalloc), not its default mimalloc.
  Started right after pytrec_eval had freed 2 GB, one thread scored in 2.92-3.10 s with mimalloc, 2.36-2.45 s
  with jemalloc and 2.29-2.53 s with the system allocator. At 100 million lines jemalloc also kept the least
  memory (3,056 MB, against 3,233 MB with mimalloc and 3,973 MB with the system allocator).

Both figures are from one kind of machine; elsewhere either default may be neutral or cost a little, so each
gives way to the user's own choice: when ``NUMPY_MADVISE_HUGEPAGE`` (numpy's switch) or
``ARROW_DEFAULT_MEMORY_POOL`` (Arrow's) is set in the environment, that setting is left alone. Both switches are
process-wide: for the duration, other threads' arrays get the same treatment. A numpy without the switch is left
alone too.

Like :mod:`evalkit.common.output`, this is a leaf utility that any layer may use.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

__all__ = ["ARROW_POOL_VAR", "HUGEPAGE_VAR", "scoring_memory"]

HUGEPAGE_VAR = "NUMPY_MADVISE_HUGEPAGE"
ARROW_POOL_VAR = "ARROW_DEFAULT_MEMORY_POOL"


def _switch() -> Callable[[bool], bool] | None:
    """numpy's process-wide huge-page switch (it returns the previous setting), or None."""
    core = getattr(np, "_core", None)
    multiarray = getattr(core, "multiarray", None)
    switch: Callable[[bool], bool] | None = getattr(multiarray, "_set_madvise_hugepage", None)
    return switch


@contextmanager
def _small_pages() -> Iterator[None]:
    switch = _switch()
    if switch is None or HUGEPAGE_VAR in os.environ:
        yield
        return
    previous = switch(False)
    try:
        yield
    finally:
        switch(previous)


def _pool() -> pa.MemoryPool:
    """jemalloc when this pyarrow has it, else the system allocator."""
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc (Windows wheels)
        return pa.system_memory_pool()


@contextmanager
def _allocator() -> Iterator[None]:
    if ARROW_POOL_VAR in os.environ:
        yield
        return
    previous = pa.default_memory_pool()
    pa.set_memory_pool(_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(previous)


@contextmanager
def scoring_memory() -> Iterator[None]:
    """Inside the block, numpy asks for no huge pages and Arrow allocates from jemalloc (see the module docstring);
    the previous settings come back afterwards, also when the block raises."""
    with _small_pages(), _allocator():
        yield
