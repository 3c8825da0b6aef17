"""How a run covers a fixture: the policy every front door applies to a run scored against a fixture's queries and
chunks (the docs' "Score a run file" page declares it)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.data.inputs import clip
from evalkit.data.runs import Run, RunFileError

__all__ = ["RunCoverage", "check_run", "refuse_unscorable"]


@dataclass(frozen=True)
class RunCoverage:
    """How a run covers a fixture: counts (and the first few IDs) of what the policies above repaired."""

    missing_queries: tuple[str, ...]
    unknown_chunks: tuple[str, ...]
    unjudged_queries: int = 0
    """Queries of the run the fixture does not hold: left out, as on the qrels path (trec_eval's policy)."""

    def describe(self) -> str:
        """One line with the counts (duplicate lines are counted as the run is scored)."""
        return (
            f"{len(self.missing_queries)} fixture query(ies) missing from the run (scored as empty rankings), "
            f"{self.unjudged_queries} run query(ies) not in the fixture (left out), "
            f"{len(self.unknown_chunks)} unknown chunk ID(s) kept as not relevant"
        )


def check_run(run: Run, query_ids: Iterable[str], chunk_ids: Iterable[str]) -> RunCoverage:
    """Apply the policy every front door shares: queries of the run the judgments do not hold are left out and
    counted, and a run none of whose queries they hold is refused (it is the run of another collection); missing
    queries and unknown chunks are counted."""
    queries = set(query_ids)
    named = run.queries.to_pylist()
    unjudged_queries = [q for q in named if q not in queries]
    refuse_unscorable(run.name, len(named), run.lines, len(unjudged_queries), "the fixture", unjudged_queries[:1])
    known = pa.array(sorted(set(chunk_ids)), type=pa.string())
    used = pc.unique(run.doc_ids).cast(pa.string())  # hashed in C: no per-line Python, no dictionary of the run
    unknown = sorted(pc.filter(used, pc.invert(pc.is_in(used, value_set=known))).to_pylist())
    return RunCoverage(
        missing_queries=tuple(sorted(queries - set(named))),
        unknown_chunks=tuple(unknown),
        unjudged_queries=len(unjudged_queries),
    )


def refuse_unscorable(
    name: str, queries: int, lines: int, unjudged: int, judgments: str, first: Sequence[str] = ()
) -> None:
    """Refuse a run with no result line at all (`lines` 0: an empty file, or `queries` named with no result under
    any of them: a retrieval job that wrote nothing, more likely than a system that answered no query) and a run none
    of whose `queries` the `judgments` hold (`unjudged` of them: the run of another collection), naming the run;
    ``RunFileError`` (exit 2 at the command line)."""
    if lines == 0:
        named = f" ({queries} query(ies) named, none with a result)" if queries else ""
        raise RunFileError(
            f"run {name}: holds no result line{named}, so there is nothing to score (was the run written?); a "
            "system that returns nothing for a query leaves that query out of its run, not every query"
        )
    if unjudged == queries:
        named = f" (the first: {clip(repr(first[0]))})" if first else ""
        raise RunFileError(
            f"run {name}: none of its {queries} query(ies) is in {judgments}{named}; is it the run of another "
            "collection?"
        )
