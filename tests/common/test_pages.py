"""evalkit.common.pages: numpy's huge-page request is off inside the block, restored after, and left alone when the
user set numpy's own switch."""

from __future__ import annotations

import pytest

from evalkit.common import pages


def _current() -> bool:
    switch = pages._switch()
    assert switch is not None, "this numpy has no huge-page switch: the tests below would prove nothing"
    previous = switch(True)
    switch(previous)
    return previous


@pytest.mark.parametrize("before", [True, False])
def test_off_inside_the_block_and_restored_after(monkeypatch: pytest.MonkeyPatch, before: bool) -> None:
    monkeypatch.delenv(pages.ENV_VAR, raising=False)
    switch = pages._switch()
    assert switch is not None
    original = switch(before)
    try:
        with pages.small_pages():
            assert _current() is False
        assert _current() is before
    finally:
        switch(original)


def test_restored_when_the_block_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pages.ENV_VAR, raising=False)
    switch = pages._switch()
    assert switch is not None
    original = switch(True)
    try:
        with pytest.raises(RuntimeError, match="inside"), pages.small_pages():
            raise RuntimeError("inside")
        assert _current() is True
    finally:
        switch(original)


def test_the_users_own_setting_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pages.ENV_VAR, "1")
    switch = pages._switch()
    assert switch is not None
    original = switch(True)
    try:
        with pages.small_pages():
            assert _current() is True
    finally:
        switch(original)


def test_a_numpy_without_the_switch_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pages.ENV_VAR, raising=False)
    switch = pages._switch()
    assert switch is not None
    original = switch(True)
    monkeypatch.setattr(pages, "_switch", lambda: None)  # as a numpy without it would answer
    try:
        with pages.small_pages():
            previous = switch(True)
            assert previous is True  # the real setting was not touched
    finally:
        switch(original)


def test_scoring_runs_with_small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    import evalkit.runs.scoring as scoring

    monkeypatch.delenv(pages.ENV_VAR, raising=False)
    seen: list[bool] = []
    real = scoring.score_run

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(_current())
        return real(*args, **kwargs)

    monkeypatch.setattr(scoring, "score_run", spy)
    result = scoring.score({"q1": {"a": 1}}, {"q1": {"a": 1.0, "b": 0.5}}, measures=["ndcg@10"])
    assert result.aggregate == {"ndcg@10": 1.0}
    assert seen == [False]
