"""How the evalkit command ends on a signal: SIGINT (Ctrl-C) exits 130 and SIGTERM 143, each with one line on
stderr, after ``finally`` blocks have removed any temporary file. A light module (no evalkit import), so that the
console script (:mod:`evalkit.app.launch`) can use it before the command is imported."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

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
        return stopped(signal.SIGINT)
    except Terminated:
        return stopped(signal.SIGTERM)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def stopped(signum: int) -> int:
    """Print the line of a command stopped by ``signum`` and return its exit code."""
    if signum == signal.SIGINT:
        print("evalkit: interrupted (SIGINT); nothing partial was written", file=sys.stderr)
        return EXIT_SIGINT
    print("evalkit: terminated (SIGTERM); nothing partial was written", file=sys.stderr)
    return EXIT_SIGTERM
