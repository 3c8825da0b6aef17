"""The ``evalkit`` console script's first module: Ctrl-C or SIGTERM while the command is still starting.

Importing the command (pandas, pyarrow, pydantic and the rest) takes about half a second. A signal in that time
ended in a traceback (SIGINT) or a bare signal death (SIGTERM); here both end as they do later on, with one line on
stderr and exit 130 or 143. This module imports nothing of evalkit's until its handlers are in place, and
``import evalkit`` itself imports nothing (see :mod:`evalkit`). A signal in the first tens of milliseconds, while
Python itself starts, is still Python's to handle.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM, so that ``finally`` blocks (temporary files) run before exiting."""


def raise_terminated(signum: int, frame: FrameType | None) -> None:
    """The SIGTERM handler of the command: raise :class:`Terminated`."""
    raise Terminated


def with_signals(command: Callable[[], int]) -> int:
    """``command()``, ending with one line on stderr and exit 130 on SIGINT (Ctrl-C) or 143 on SIGTERM (raised as
    :class:`Terminated` in the main thread, so that ``finally`` blocks remove temporary files first)."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, raise_terminated) if in_main_thread else None
    try:
        return command()
    except KeyboardInterrupt:
        return _stopped(signal.SIGINT)
    except Terminated:
        return _stopped(signal.SIGTERM)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: import the command with the signals held, then run it (:func:`evalkit.app.cli.main`).

    While the command is imported, SIGINT and SIGTERM are only recorded: an exception raised from a signal handler
    inside C code of an import can be swallowed there (one SIGTERM in ten, sent 0.36-0.51 s into the start, was
    lost, and the command then ran to its end with exit 0). After the import, a recorded signal ends the command
    before it starts."""
    received: list[int] = []
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGINT, signal.SIGTERM):
            previous[number] = signal.signal(number, lambda signum, frame: received.append(signum))
    try:
        from evalkit.app.cli import main as command
    finally:
        for held, handler in previous.items():
            signal.signal(held, handler)
    if received:
        return _stopped(received[0])
    return with_signals(lambda: command(argv))


def _stopped(signum: int) -> int:
    """Print the line of a command stopped by ``signum`` and return its exit code."""
    if signum == signal.SIGINT:
        print("evalkit: interrupted (SIGINT); nothing partial was written", file=sys.stderr)
        return EXIT_SIGINT
    print("evalkit: terminated (SIGTERM); nothing partial was written", file=sys.stderr)
    return EXIT_SIGTERM
