"""The labelling notebook's logic: one reviewer's blind pass over (query, chunk) pairs, or an adjudication of two.

:class:`LabellingSession` holds the state without a browser: the pairs, this reviewer's decisions (read from their own
label file only, so a reviewer never sees another's labels), the pair shown, the spans marked on it, skip and back,
and progress per language. :meth:`LabellingSession.record` writes each decision at once, atomically, through a
:class:`evalkit.data.labels.LabelFile` (which keeps the file's decisions, so that the 10,000th decision is saved as
fast as the first); a session opened again resumes at the first undecided pair. In adjudication
the pairs are what a merge needs adjudicated (the two reviewers' disagreements, and the chunks only one of them
decided), shown with both grades and spans, and the adjudicator's decisions go
to a third file.

:class:`LabellingWidget` is the thin front: an anywidget whose small ES module draws :func:`session_view` and sends
back actions (grade keys 0-3, ``s`` skip, ``b`` back, ``c`` clear, and text selected in the chunk), which
:func:`apply_action` carries out. Browsers count string offsets in UTF-16 code units; :func:`python_span` turns a
selection into Python character offsets (a character outside the Basic Multilingual Plane is two units in the
browser and one character here).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import anywidget
import traitlets
from pydantic import Field, field_validator, model_validator

from evalkit.app.notebook import NotebookParameters, relative_to_root
from evalkit.common.output import resolve_output_path
from evalkit.data.fixture import Fixture, load_fixture
from evalkit.data.label_merge import DEFAULT_OVERLAP_BOUND
from evalkit.data.label_tasks import LabelTask, load_tasks, span_text
from evalkit.data.labels import LabelDecision, LabelFile, read_labels, same_person, text_sha256
from evalkit.data.schema import LANGUAGES, Identifier

if TYPE_CHECKING:
    from evalkit.measures.agreement import Disagreement

Mode = Literal["label", "adjudicate"]
PairKey = tuple[str, str | None]
"""A pair: query ID and chunk ID (None: the query's no-answer decision)."""
GRADE_NAMES = {0: "not relevant", 1: "supporting", 2: "substantial", 3: "answers"}


def python_span(text: str, start16: int, end16: int) -> tuple[int, int]:
    """The Python character offsets ``[start, end)`` of a browser selection ``[start16, end16)`` in `text`, counted
    in UTF-16 code units (a character above U+FFFF is two units). A bound inside a surrogate pair widens the span
    to the whole character; bounds outside ``0..`` the text's UTF-16 length, or ``start16 > end16``, are refused."""
    bounds = [0]
    for char in text:
        bounds.append(bounds[-1] + (2 if ord(char) > 0xFFFF else 1))
    if not 0 <= start16 <= end16 <= bounds[-1]:
        raise ValueError(f"selection [{start16}, {end16}) is outside the chunk's {bounds[-1]} UTF-16 units")
    return bisect_right(bounds, start16) - 1, bisect_left(bounds, end16)


def merge_span(spans: Iterable[tuple[int, int]], new: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    """`spans` with `new` added, sorted, overlapping or touching spans merged into one."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted([*spans, new]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return tuple(merged)


class LabellingSession:
    """One reviewer's pass over `tasks` ("label"), or an adjudicator's over two reviewers' disagreements and the
    chunks only one of them decided.

    Only `labels_path` (this reviewer's own file) is read; a file holding another reviewer's decisions is refused,
    so the session stays blind. `compare` holds, in adjudication, each pair's disagreement (both reviewers' grades
    and spans) and is empty otherwise.
    """

    def __init__(
        self,
        tasks: Sequence[LabelTask],
        labels_path: Path,
        reviewer: str,
        fixture: Fixture,
        compare: Mapping[tuple[str, str], Disagreement] | None = None,
    ) -> None:
        self.tasks = tuple(tasks)
        self.labels_path = labels_path
        self.reviewer = reviewer
        self.fixture = fixture
        self.compare = dict(compare or {})
        self.mode: Mode = "adjudicate" if compare is not None else "label"
        self._file = LabelFile(labels_path, fixture)
        self._language: dict[PairKey, str] = {self.key(t): t.language for t in self.tasks}  # each pair once
        self._pairs = Counter(self._language.values())
        self._done: Counter[str] = Counter()
        self._generation = -1  # the LabelFile generation `_done` was counted from
        self._count()
        self._history: list[int] = []
        self.index: int | None = self.first_undecided()
        self.spans: tuple[tuple[int, int], ...] = self._recorded_spans()

    @property
    def decisions(self) -> Mapping[PairKey, LabelDecision]:
        """This reviewer's decisions by pair, as the label file holds them now: read again when another process
        (a second notebook of the same reviewer) wrote it, so that a pair decided there is not offered again here
        and the progress counts it."""
        return self._sync()

    def _sync(self) -> Mapping[PairKey, LabelDecision]:
        self._file.refresh()
        if self._file.generation != self._generation:
            self._count()
        return self._file.decisions

    def _count(self) -> None:
        """Count the decided pairs by language from the file as read (and refuse another reviewer's decisions)."""
        held = self._file.decisions
        others = sorted({d.reviewer for d in self._file.held.values()} - {self.reviewer})  # stale ones too
        if others:
            raise ValueError(
                f"{self.labels_path.name} holds decisions of {', '.join(others)}: each reviewer labels into a file "
                f"of their own (reviewer {self.reviewer!r})"
            )
        self._done = Counter(self._language[k] for k in held if k in self._language)
        self._generation = self._file.generation

    @staticmethod
    def key(task: LabelTask) -> tuple[str, str]:
        """The pair a task asks about."""
        return (task.query_id, task.chunk_id)

    @property
    def current(self) -> LabelTask | None:
        """The pair shown, or None when every pair is decided and none was gone back to."""
        return None if self.index is None else self.tasks[self.index]

    def decision(self, task: LabelTask) -> LabelDecision | None:
        """This reviewer's decision of `task`, if any."""
        return self.decisions.get(self.key(task))

    def first_undecided(self, after: int = -1) -> int | None:
        """The first undecided pair after position `after`, wrapping round; None when every pair is decided."""
        count, decided = len(self.tasks), self.decisions
        for step in range(1, count + 1):
            position = (after + step) % count
            if self.key(self.tasks[position]) not in decided:
                return position
        return None

    def _go(self, position: int | None) -> None:
        if self.index is not None and position != self.index:
            self._history.append(self.index)
        self.index = position
        self.spans = self._recorded_spans()

    def _recorded_spans(self) -> tuple[tuple[int, int], ...]:
        task = self.current
        decision = None if task is None else self.decision(task)
        return () if decision is None else tuple(decision.spans)

    def skip(self) -> None:
        """Show the next undecided pair (this one stays undecided)."""
        start = -1 if self.index is None else self.index
        following = self.first_undecided(start)
        if following is not None:
            self._go(following)

    def back(self) -> None:
        """Show the pair shown before this one (else the previous pair in order), with its decision if any."""
        if self._history:
            self.index = self._history.pop()
        elif self.index is not None and self.index > 0:
            self.index -= 1
        elif self.index is None and self.tasks:
            self.index = len(self.tasks) - 1
        self.spans = self._recorded_spans()

    def mark(self, start: int, end: int) -> tuple[int, int]:
        """Mark ``[start, end)`` (Python offsets, white space at either end trimmed) on the pair shown; returns the
        span marked."""
        text = self._text()
        if not 0 <= start < end <= len(text):
            raise ValueError(f"span [{start}, {end}) is empty or outside the chunk's {len(text)} characters")
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start == end:
            raise ValueError("the selection holds white space only")
        self.spans = merge_span(self.spans, (start, end))
        return start, end

    def mark_utf16(self, start16: int, end16: int) -> tuple[int, int]:
        """Mark a browser selection given in UTF-16 code units (see :func:`python_span`)."""
        return self.mark(*python_span(self._text(), start16, end16))

    def clear(self) -> None:
        """Forget the spans marked on the pair shown."""
        self.spans = ()

    def span_texts(self) -> tuple[str, ...]:
        """The exact characters of each marked span."""
        return span_text(self._text(), self.spans)

    def _text(self) -> str:
        task = self.current
        if task is None:
            raise ValueError("every pair is decided: nothing is shown")
        return task.chunk_text

    def record(self, grade: int, note: str | None = None) -> LabelDecision:
        """Decide the pair shown (grade 1-3 with the marked spans; grade 0 drops them), write the decision at once,
        atomically, and show the next undecided pair."""
        task = self.current
        if task is None:
            raise ValueError("every pair is decided: nothing to record")
        if grade not in GRADE_NAMES:
            raise ValueError(f"grade {grade} is outside 0-3")
        if grade and not self.spans:
            raise ValueError(f"grade {grade} needs at least one span: select the supporting text in the chunk")
        decision = LabelDecision(
            query_id=task.query_id,
            chunk_id=task.chunk_id,
            grade=grade,
            spans=self.spans if grade else (),
            reviewer=self.reviewer,
            note=note or None,
            chunk_sha256=text_sha256(task.chunk_text),
        )
        new = self.key(task) not in self.decisions
        self._file.record(decision)
        if self._file.generation != self._generation:  # the file was read again while recording: count afresh
            self._count()
        elif new:
            self._done[task.language] += 1
        self._go(self.first_undecided(self.index if self.index is not None else -1))
        return decision

    def progress(self) -> tuple[tuple[str, int, int], ...]:
        """``(language, done, to do)`` for each language with pairs, then ``("all", done, to do)``."""
        self._sync()
        rows = [
            (language, self._done[language], self._pairs[language] - self._done[language]) for language in LANGUAGES
        ]
        done = sum(self._done.values())
        return (*(row for row in rows if sum(row[1:])), ("all", done, len(self._language) - done))


def adjudication_tasks(fixture: Fixture, found: Iterable[Disagreement]) -> tuple[LabelTask, ...]:
    """The pairs of `found` as tasks, with the query and chunk text from `fixture`, in the order given."""
    queries = {q.query_id: q for q in fixture.queries}
    chunks = {c.chunk_id: c for c in fixture.chunks}
    titles = {d.doc_id: d.title for d in fixture.documents}
    tasks = []
    for item in found:
        chunk = chunks[item.chunk_id]
        query = queries[item.query_id]
        tasks.append(
            LabelTask(query.query_id, chunk.chunk_id, query.language, query.text, titles[chunk.doc_id], chunk.text)
        )
    return tuple(tasks)


def _spans_view(text: str, spans: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
    return [{"start": s, "end": e, "text": t} for (s, e), t in zip(spans, span_text(text, spans), strict=True)]


def _segments(text: str, spans: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
    """The chunk text cut at the marked spans: ``{"text", "marked"}`` pieces that join to the whole text."""
    pieces, at = [], 0
    for start, end in spans:
        if start > at:
            pieces.append({"text": text[at:start], "marked": False})
        pieces.append({"text": text[start:end], "marked": True})
        at = end
    if at < len(text) or not pieces:
        pieces.append({"text": text[at:], "marked": False})
    return pieces


def session_view(session: LabellingSession, message: str | None = None) -> dict[str, Any]:
    """What the widget draws: plain JSON data (the ES module renders it as text, never as HTML)."""
    view: dict[str, Any] = {
        "mode": session.mode,
        "reviewer": session.reviewer,
        "progress": [{"language": lang, "done": d, "to_do": t} for lang, d, t in session.progress()],
        "message": message,
        "grades": [{"grade": g, "name": n} for g, n in GRADE_NAMES.items()],
        "task": None,
    }
    task = session.current
    if task is None:
        return view
    text = task.chunk_text
    recorded = session.decision(task)
    view["position"] = {"index": (session.index or 0) + 1, "count": len(session.tasks)}
    view["task"] = {
        "query_id": task.query_id,
        "chunk_id": task.chunk_id,
        "language": task.language,
        "query_text": task.query_text,
        "chunk_title": task.chunk_title,
        "segments": _segments(text, session.spans),
        "spans": _spans_view(text, session.spans),
        "recorded": None if recorded is None else {"grade": recorded.grade, "note": recorded.note},
    }
    found = session.compare.get(session.key(task))
    if found is not None:
        view["task"]["reviews"] = [
            {"reviewer": who, "grade": grade, "spans": _spans_view(text, spans)}
            for who, grade, spans in (
                (found.reviewer_a, found.grade_a, found.spans_a),
                (found.reviewer_b, found.grade_b, found.spans_b),
            )
        ]
    return view


def apply_action(session: LabellingSession, action: Mapping[str, Any]) -> str | None:
    """Carry out one action the widget sent; the message to show (what was saved, or why nothing was)."""
    kind = action.get("action")
    try:
        if kind == "grade":
            decision = session.record(int(action["grade"]), action.get("note"))
            return f"saved grade {decision.grade} of {decision.query_id} / {decision.chunk_id}"
        if kind == "select":
            start, end = session.mark_utf16(int(action["start"]), int(action["end"]))
            return f"marked [{start}, {end})"
        if kind in ("skip", "back", "clear"):
            getattr(session, kind)()
            return None
    except KeyError as exc:
        return f"malformed action {kind!r}: no {exc}"
    except (ValueError, OSError, TypeError) as exc:  # a refused action is shown, the session goes on
        return f"not saved: {exc}" if kind == "grade" else str(exc)
    return f"unknown action {kind!r}"


_ESM = Path(__file__).with_name("labelling.js")
"""The widget's ES module, a file beside this one (package data)."""

_CSS = """
.evalkit-label { font-family: var(--jp-ui-font-family, sans-serif); padding: 8px; outline: none;
  border: 1px solid var(--jp-border-color2, #ccc); border-radius: 4px; max-width: 60em; }
.evalkit-label:focus { border-color: var(--jp-brand-color1, #1976d2); }
.evalkit-head { display: flex; justify-content: space-between; gap: 1em; margin-bottom: 6px; }
.evalkit-meta, .evalkit-position, .evalkit-offsets { color: var(--jp-ui-font-color2, #666); font-size: 90%; }
.evalkit-title { font-weight: bold; }
.evalkit-chunk-text { white-space: pre-wrap; line-height: 1.7; padding: 6px; user-select: text; cursor: text;
  background: var(--jp-layout-color2, #f5f5f5); }
.evalkit-chunk-text mark { background: #ffe08a; }
.evalkit-reviews { display: flex; gap: 1em; } .evalkit-review { flex: 1; }
.evalkit-buttons button { margin: 4px 4px 4px 0; }
.evalkit-note { width: 100%; box-sizing: border-box; }
.evalkit-message { min-height: 1.4em; color: var(--jp-ui-font-color1, #222); }
"""


class LabellingWidget(anywidget.AnyWidget):
    """The labelling session in a notebook: draws :func:`session_view`, sends back actions."""

    _esm = _ESM
    _css = _CSS
    view = traitlets.Dict().tag(sync=True)

    def __init__(self, session: LabellingSession) -> None:
        super().__init__()
        self.session = session
        self.view = session_view(session)
        self.on_msg(self._on_message)

    def _on_message(self, _widget: object, content: Mapping[str, Any], _buffers: object) -> None:
        self.view = session_view(self.session, apply_action(self.session, content))


class LabelParameters(NotebookParameters):
    """Parameters of ``notebooks/label.ipynb``; every path is relative to the project root."""

    fixture: str = Field(description="fixture directory whose queries and chunks are labelled")
    tasks: str | None = Field(default=None, description="pool JSON lines (evalkit pool); None: every judged pair")
    reviewer: Identifier = Field(description="who labels (or adjudicates); written into every decision")
    labels: str | None = Field(
        default=None, description="this reviewer's label file; None: reports/labels/<reviewer>.jsonl"
    )
    mode: Mode = Field(default="label", description="label: blind, own file only; adjudicate: labels_a vs labels_b")
    labels_a: str | None = Field(default=None, description="adjudicate: the first reviewer's label file")
    labels_b: str | None = Field(default=None, description="adjudicate: the second reviewer's label file")
    overlap_bound: float = Field(
        default=DEFAULT_OVERLAP_BOUND,
        ge=0.0,
        le=1.0,
        description="adjudicate: spans of one grade agree at this token F1 or above, as `evalkit labels agree "
        "--overlap-bound` and `labels merge --overlap-bound` read them (give the same bound to all three)",
    )

    _paths_relative = field_validator("fixture", "tasks", "labels", "labels_a", "labels_b")(relative_to_root)

    @model_validator(mode="after")
    def _inputs_fit_mode(self) -> Self:
        given = [name for name in ("labels_a", "labels_b") if getattr(self, name) is not None]
        if self.mode == "label" and given:
            raise ValueError(f"{', '.join(given)}: read in mode 'adjudicate' only (labelling is blind)")
        if self.mode == "adjudicate" and len(given) < 2:
            raise ValueError("mode 'adjudicate' needs labels_a and labels_b, the two reviewers' label files")
        labels = self.labels_file  # checked like every output path before anything runs
        if self.mode == "adjudicate" and labels in {self.root / str(self.labels_a), self.root / str(self.labels_b)}:
            raise ValueError("labels: the adjudicator's decisions go to a file of their own, not labels_a or labels_b")
        return self

    @property
    def labels_file(self) -> Path:
        """This reviewer's label file (checked like every output path; nothing is created until a decision)."""
        return resolve_output_path(self.labels or f"reports/labels/{self.reviewer}.jsonl", self.root)

    def open_session(self) -> LabellingSession:
        """The session these parameters ask for: this reviewer's pass, or the adjudication of labels_a and labels_b."""
        fixture = load_fixture(self.root / self.fixture).fixture
        if self.mode == "label":
            tasks = load_tasks(fixture, None if self.tasks is None else self.root / self.tasks)
            return LabellingSession(tasks, self.labels_file, self.reviewer, fixture)
        from evalkit.measures.agreement import to_adjudicate

        first = read_labels(self.root / str(self.labels_a), fixture)
        second = read_labels(self.root / str(self.labels_b), fixture)
        found = to_adjudicate(first, second, fixture, self.overlap_bound)
        if any(same_person(self.reviewer, d.reviewer) for d in (*first[:1], *second[:1])):
            raise ValueError(f"reviewer {self.reviewer!r} labelled one of the files: the adjudicator is a third person")
        compare = {(d.query_id, d.chunk_id): d for d in found}
        return LabellingSession(adjudication_tasks(fixture, found), self.labels_file, self.reviewer, fixture, compare)
