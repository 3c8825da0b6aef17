"""evalkit.common.memory: inside scoring_memory numpy asks for no huge pages and Arrow allocates from jemalloc
(or the system allocator); both come back afterwards, also on an exception, and a user's own setting of either is
left alone."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from evalkit.common import memory


def _huge_pages() -> bool:
    switch = memory._switch()
    assert switch is not None, "this numpy has no huge-page switch: the tests below would prove nothing"
    previous = switch(True)
    switch(previous)
    return previous


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Neither variable set; numpy's switch and Arrow's pool as they were, restored after the test."""
    monkeypatch.delenv(memory.HUGEPAGE_VAR, raising=False)
    monkeypatch.delenv(memory.ARROW_POOL_VAR, raising=False)
    switch = memory._switch()
    assert switch is not None
    pages, pool = switch(True), pa.default_memory_pool()
    try:
        yield
    finally:
        switch(pages)
        pa.set_memory_pool(pool)


@pytest.mark.usefixtures("settings")
@pytest.mark.parametrize("before", [True, False])
def test_both_are_set_inside_the_block_and_restored_after(before: bool) -> None:
    switch = memory._switch()
    assert switch is not None
    switch(before)
    pa.set_memory_pool(pa.mimalloc_memory_pool())
    with memory.scoring_memory():
        assert _huge_pages() is False
        assert pa.default_memory_pool().backend_name == memory._pool().backend_name
    assert _huge_pages() is before
    assert pa.default_memory_pool().backend_name == "mimalloc"


@pytest.mark.usefixtures("settings")
def test_both_are_restored_when_the_block_raises() -> None:
    pa.set_memory_pool(pa.mimalloc_memory_pool())
    with pytest.raises(RuntimeError, match="inside"), memory.scoring_memory():
        raise RuntimeError("inside")
    assert _huge_pages() is True
    assert pa.default_memory_pool().backend_name == "mimalloc"


@pytest.mark.usefixtures("settings")
def test_the_users_own_settings_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(memory.HUGEPAGE_VAR, "1")
    monkeypatch.setenv(memory.ARROW_POOL_VAR, "mimalloc")
    pa.set_memory_pool(pa.mimalloc_memory_pool())
    with memory.scoring_memory():
        assert _huge_pages() is True
        assert pa.default_memory_pool().backend_name == "mimalloc"


@pytest.mark.usefixtures("settings")
def test_jemalloc_is_used_where_pyarrow_has_it_else_the_system_allocator(monkeypatch: pytest.MonkeyPatch) -> None:
    assert memory._pool().backend_name == "jemalloc"  # the Linux wheels this project installs have it

    def missing() -> pa.MemoryPool:
        raise NotImplementedError("built without jemalloc")

    monkeypatch.setattr(pa, "jemalloc_memory_pool", missing)
    assert memory._pool().backend_name == "system"


@pytest.mark.usefixtures("settings")
def test_a_numpy_without_the_switch_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    switch = memory._switch()
    assert switch is not None
    monkeypatch.setattr(memory, "_switch", lambda: None)  # as a numpy without it would answer
    with memory.scoring_memory():
        assert switch(True) is True  # the real setting was not touched


@pytest.mark.usefixtures("settings")
def test_scoring_runs_inside_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    import evalkit.runs.precomputed as scoring
    import evalkit.runs.run_sources as sources

    pa.set_memory_pool(pa.mimalloc_memory_pool())
    seen: list[tuple[bool, str]] = []
    real = sources.score_run

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append((_huge_pages(), pa.default_memory_pool().backend_name))
        return real(*args, **kwargs)

    monkeypatch.setattr(sources, "score_run", spy)
    result = scoring.score({"q1": {"a": 1}}, {"q1": {"a": 1.0, "b": 0.5}}, measures=["ndcg@10"])
    assert result.aggregate == {"ndcg@10": 1.0}
    assert seen == [(False, memory._pool().backend_name)]
    assert pa.default_memory_pool().backend_name == "mimalloc"
