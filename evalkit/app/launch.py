"""The ``evalkit`` console script's first module: Ctrl-C or SIGTERM while the command is still starting.

Importing the command (pandas, pyarrow, pydantic and the rest) takes about half a second. A signal in that time
ended in a traceback (SIGINT) or a bare signal death (SIGTERM); here both end as they do later on, with one line on
stderr and exit 130 or 143 (:mod:`evalkit.app.signals`). Until its handlers are in place this module imports only
that light module, and ``import evalkit`` itself imports nothing (see :mod:`evalkit`). A signal in the first tens
of milliseconds, while Python itself starts, is still Python's to handle.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence
from typing import Any

from evalkit.app.signals import stopped, with_signals


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
            if number == signal.SIGINT and signal.getsignal(number) is signal.SIG_IGN:
                continue  # a background job's SIGINT, which the shell ignores, stays ignored
            previous[number] = signal.signal(number, lambda signum, frame: received.append(signum))
    try:
        from evalkit.app.cli import command_modules
        from evalkit.app.cli import main as command

        command_modules(argv)  # the subcommand's own module (pandas, pyarrow, ...), under the same hold
    finally:
        for held, handler in previous.items():
            signal.signal(held, handler)
    if received:
        return stopped(received[0])
    return with_signals(lambda: command(argv))
