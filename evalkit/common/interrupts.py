"""Which signal stopped work in C code that drops the exception its signal handler raised.

usearch checks for signals while it adds rows to a graph or searches it; when a handler raises (``KeyboardInterrupt``
for SIGINT, :class:`Terminated` for the command's SIGTERM), usearch drops that exception and raises
``RuntimeError("Operation has been terminated")`` instead, which would end the command in a traceback with exit 1.
The command's handlers (:mod:`evalkit.app.signals`) record the signal here before raising, so that the caller can
raise the signal's own exception again (:func:`signal_exception`) and the command exits 130 or 143.

Standard library only: the console script imports it before anything else.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Terminated", "forget_signals", "interrupted", "signal_exception", "signals_raised_from", "terminated"]

_received: list[int] = []


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM, so that ``finally`` blocks (temporary files) run before exiting."""


def interrupted(signum: int, frame: FrameType | None) -> None:
    """The command's SIGINT handler: record it, raise ``KeyboardInterrupt`` (as Python's own handler does)."""
    _received[:] = [signal.SIGINT]
    raise KeyboardInterrupt


def terminated(signum: int, frame: FrameType | None) -> None:
    """The command's SIGTERM handler: record it, raise :class:`Terminated`."""
    _received[:] = [signal.SIGTERM]
    raise Terminated


def forget_signals() -> None:
    """Forget the signals recorded so far: a command starting in a process where an earlier one was stopped."""
    _received.clear()


def signal_exception() -> BaseException:
    """The exception of the last signal the handlers recorded: :class:`Terminated` after SIGTERM, else
    ``KeyboardInterrupt`` (what Python's own SIGINT handler raises when the command's are not installed)."""
    return Terminated() if _received == [signal.SIGTERM] else KeyboardInterrupt()


@contextmanager
def signals_raised_from(message: str) -> Iterator[None]:
    """Inside the block, a ``RuntimeError(message)`` (what C code raises after dropping a signal handler's exception)
    is raised again as the signal's own exception (:func:`signal_exception`), so that Ctrl-C or SIGTERM ends the
    command with 130 or 143 rather than a traceback and exit 1."""
    try:
        yield
    except RuntimeError as exc:
        if str(exc) != message:
            raise
        raise signal_exception() from None
