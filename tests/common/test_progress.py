"""Progress bars: shown to a person at a terminal only, never in CI, pipes or notebooks."""

from __future__ import annotations

import pytest

from evalkit.common import progress as module
from evalkit.common.progress import progress, progress_enabled


class _Terminal:
    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.written: list[str] = []

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        self.written.append(text)
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize(
    ("tty", "ci", "forced", "expected"),
    [
        (True, None, None, True),
        (True, "true", None, False),
        (False, None, None, False),
        (False, "true", "1", True),
        (True, None, "0", False),
    ],
)
def test_when_bars_are_shown(
    monkeypatch: pytest.MonkeyPatch, tty: bool, ci: str | None, forced: str | None, expected: bool
) -> None:
    monkeypatch.setattr(module.sys, "stderr", _Terminal(tty))
    for name, value in (("CI", ci), (module.ENV_VAR, forced)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert progress_enabled() is expected


def test_items_pass_through_unchanged_with_or_without_a_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal(True)
    monkeypatch.setattr(module.sys, "stderr", terminal)
    monkeypatch.setenv(module.ENV_VAR, "0")
    assert list(progress(iter(range(5)), "quiet")) == [0, 1, 2, 3, 4]
    assert terminal.written == []
    monkeypatch.setenv(module.ENV_VAR, "1")
    assert list(progress(range(5), "loud", total=5)) == [0, 1, 2, 3, 4]
    assert any("loud" in text for text in terminal.written)


def test_a_meter_counts_work_on_a_terminal_and_is_quiet_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal(True)
    monkeypatch.setattr(module.sys, "stderr", terminal)
    monkeypatch.setenv(module.ENV_VAR, "0")
    with module.meter("quiet", "line") as bar:
        bar.update(10)
    assert terminal.written == []
    monkeypatch.setenv(module.ENV_VAR, "1")
    with module.meter("counted", "line") as bar:
        bar.update(2_500_000)
    shown = "".join(terminal.written)
    assert "counted" in shown and "line" in shown
