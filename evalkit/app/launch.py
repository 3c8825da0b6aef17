"""The ``evalkit`` console script's first module: Ctrl-C or SIGTERM while the command is still starting.

Importing the command (pandas, pyarrow, pydantic and the rest) takes about half a second. A signal in that time
ended in a traceback (SIGINT) or a bare signal death (SIGTERM); here both end as they do later on, with one line on
stderr and exit 130 or 143. This module imports nothing of evalkit's until its handler is in place, and
``import evalkit`` itself imports nothing (see :mod:`evalkit`).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Sequence
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
        print("evalkit: interrupted (SIGINT); nothing partial was written", file=sys.stderr)
        return EXIT_SIGINT
    except Terminated:
        print("evalkit: terminated (SIGTERM); nothing partial was written", file=sys.stderr)
        return EXIT_SIGTERM
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: import the command with the signals handled, then run it (:func:`evalkit.app.cli.main`)."""

    def command() -> int:
        from evalkit.app.cli import main as run_command

        return run_command(argv)

    return with_signals(command)
