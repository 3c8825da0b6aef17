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
from collections.abc import Sequence
from types import FrameType

EXIT_SIGINT = 130
EXIT_SIGTERM = 143
INTERRUPTED = "evalkit: interrupted (SIGINT); nothing partial was written"
TERMINATED = "evalkit: terminated (SIGTERM); nothing partial was written"


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM, so that ``finally`` blocks (temporary files) run before exiting."""


def raise_terminated(signum: int, frame: FrameType | None) -> None:
    """The SIGTERM handler of the command: raise :class:`Terminated`."""
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Import the command with SIGINT and SIGTERM handled, then run it (:func:`evalkit.app.cli.main`)."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, raise_terminated) if in_main_thread else None
    try:
        from evalkit.app.cli import main as command

        return command(argv)
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return EXIT_SIGINT
    except Terminated:
        print(TERMINATED, file=sys.stderr)
        return EXIT_SIGTERM
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
