"""How the evalkit command ends on a signal: SIGINT (Ctrl-C) exits 130 and SIGTERM 143, each with one line on
stderr, after ``finally`` blocks have removed any temporary file. A light module (of evalkit it imports only
:mod:`evalkit.common.interrupts`, standard library alone), so that the console script (:mod:`evalkit.app.launch`)
can use it before the command is imported."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from evalkit.common.interrupts import Terminated, forget_signals, interrupted, terminated

EXIT_SIGINT = 130
EXIT_SIGTERM = 143
_HANDLERS = {signal.SIGINT: interrupted, signal.SIGTERM: terminated}
"""SIGINT raises ``KeyboardInterrupt`` as Python's own handler does, SIGTERM :class:`Terminated`; both record the
signal, for C code that drops the exception (:mod:`evalkit.common.interrupts`)."""


def with_signals(command: Callable[[], int]) -> int:
    """``command()``, ending with one line on stderr and exit 130 on SIGINT (Ctrl-C) or 143 on SIGTERM (raised as
    :class:`Terminated` in the main thread, so that ``finally`` blocks remove temporary files first); its output
    goes through :class:`Unread`, so that a reader that stops early changes neither what it does nor its exit
    code."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    forget_signals()  # an earlier command of this process may have been stopped
    previous = {
        number: signal.signal(number, handler)
        for number, handler in _HANDLERS.items()
        if in_main_thread and (number != signal.SIGINT or signal.getsignal(number) is signal.default_int_handler)
    }  # a SIGINT the shell ignores (a background job) stays ignored
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Unread(sys.stdout), Unread(sys.stderr)
    try:
        return command()
    except KeyboardInterrupt:
        return stopped(signal.SIGINT)
    except Terminated:
        return stopped(signal.SIGTERM)
    finally:
        sys.stdout, sys.stderr = streams
        for number, handler in previous.items():
            signal.signal(number, handler)
        forget_signals()  # what follows in this process is not stopped by this command's signal


def stopped(signum: int) -> int:
    """Print the line of a command stopped by ``signum`` and return its exit code."""
    if signum == signal.SIGINT:
        say("evalkit: interrupted (SIGINT); nothing partial was written")
        return EXIT_SIGINT
    say("evalkit: terminated (SIGTERM); nothing partial was written")
    return EXIT_SIGTERM


_TERMINAL_CONTROLS = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Characters a terminal acts on (escape sequences, carriage return, bidirectional overrides): every one but the
newline, which separates a message's own lines."""


def say(line: str) -> None:
    """Write `line` to stderr, the command's last word, even when nobody reads stderr any more (see :class:`Unread`);
    a character a terminal would act on (an escape sequence in a file name, say) is written as its escape."""
    line = _TERMINAL_CONTROLS.sub(lambda m: repr(m.group())[1:-1], line)
    stream = Unread(sys.stderr)
    stream.write(line + "\n")
    stream.flush()


class Unread:
    """A text stream (stdout or stderr) that, once nobody reads it any more (a pipe closed early, as in
    ``evalkit compare ... 2>&1 | head -5``), drops what is written instead of raising ``BrokenPipeError``: the
    command runs to its end, writes its files, and its exit code still says what happened (the broken pipe had
    ended a refusal with exit 1, a failed gate's code, and a success with exit 2). Its descriptor is then pointed
    at /dev/null, so that Python's last flush at exit does not fail either."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._silence()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    def _silence(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # a stream without a descriptor (a test's capture) stays as is
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, self._stream.fileno())
            os.close(quiet)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
