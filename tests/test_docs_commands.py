"""Every ``evalkit`` command line in the README and the docs parses with the real argument parser, so an option that is
renamed or removed cannot linger in the documentation.

A command line is found in the fenced code blocks of README.md and docs/**/*.md (blocks tagged as Python, JSON,
YAML, TOML or text aside): lines joined at a trailing ``\\``, the comment after an unquoted ``#`` dropped, cut at
``|``, ``&&``, ``;`` and redirections, and the words after ``evalkit`` or ``.venv/bin/evalkit`` (environment
assignments before it allowed) handed to ``build_parser().parse_args``. A comment of the form ``# = evalkit ...``
(what a make target runs) is a command line too. Placeholders such as ``FILE`` or ``BASE HEAD`` are plain strings to
the parser, so they parse; a subcommand or option that does not exist does not. Inline code in the prose
(`` `evalkit NAME ...` ``) must name a subcommand that exists, and the fixture and gates examples of the fixture
guide must pass the schema.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from evalkit.app.cli import build_parser
from evalkit.data.fixture import parse_fixture
from evalkit.reporting.gate_specs import GateFile

from .conftest import ROOT

PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
PROGRAMS = frozenset({"evalkit", ".venv/bin/evalkit"})
OPERATORS = frozenset({"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>>", "&>", "2>&1"})
NOT_SHELL = frozenset({"python", "py", "pycon", "json", "jsonc", "jsonl", "yaml", "yml", "toml", "ini", "text"})
FIXTURE_GUIDE = ROOT / "docs" / "building-a-fixture.md"
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
PROGRAM_WORD = re.compile(r"(?:^|\s)(?:\.venv/bin/)?evalkit(?:\s|$)")
INLINE_COMMAND = re.compile(r"`(?:\.venv/bin/)?evalkit ([^`]*)`")
MIN_COMMANDS = 50
"""Fewer than this many found means the finder broke, not that the docs lost their examples."""


@dataclass(frozen=True)
class DocCommand:
    """One ``evalkit`` command line of a page: where it is and the words after the program."""

    where: str
    argv: tuple[str, ...]
    unreadable: str | None = None
    """Why the line could not be split into words as a shell splits it (unbalanced quotes), or None."""

    def __str__(self) -> str:
        return f"{self.where}: evalkit {shlex.join(self.argv)}"


def _code_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, logical line) of every line in the page's shell-like fenced code blocks, with ``\\``
    continuations joined."""
    fence: tuple[str, str] | None = None  # (the opening fence, the block's language)
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        found = FENCE.match(line)
        if fence is None:
            if found:
                fence = (found.group(1), found.group(2).lower())
            continue
        if found and not found.group(2) and found.group(1)[0] == fence[0][0] and len(found.group(1)) >= len(fence[0]):
            fence, pending = None, ""
            continue
        if fence[1] in NOT_SHELL:
            continue
        if not pending:
            start = number
        stripped = line.rstrip()
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        yield start, pending + line
        pending = ""


def _split_comment(line: str) -> tuple[str, str]:
    """The line's code and its comment: from the first ``#`` that starts a word outside quotes, as a shell reads it."""
    quote = None
    for index, char in enumerate(line):
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index], line[index + 1 :]
    return line, ""


def _argvs(code: str) -> Iterator[tuple[str, ...]]:
    """The words after the program of each ``evalkit`` command in one line of shell code (ValueError: unbalanced
    quotes)."""
    if not PROGRAM_WORD.search(code):
        return
    words = shlex.split(code.strip().removeprefix("$ "))
    segment: list[str] = []
    for word in [*words, ";"]:
        if word not in OPERATORS:
            segment.append(word)
            continue
        programs = [i for i, w in enumerate(segment) if w in PROGRAMS]
        if programs:
            yield tuple(segment[programs[0] + 1 :])
        segment = []


def find_commands(text: str, page: str) -> list[DocCommand]:
    """Every ``evalkit`` command line of a page's code blocks, and of its ``# = evalkit ...`` comments."""
    commands = []
    for number, line in _code_lines(text):
        code, comment = _split_comment(line)
        sources = [code]
        if comment.strip().startswith("="):
            sources.append(comment.strip()[1:])
        for source in sources:
            try:
                commands.extend(DocCommand(f"{page}:{number}", argv) for argv in _argvs(source))
            except ValueError as error:
                commands.append(DocCommand(f"{page}:{number}", (), unreadable=f"{error}: {source.strip()}"))
    return commands


def parse_problem(parser: argparse.ArgumentParser, argv: tuple[str, ...]) -> str | None:
    """What the parser says against `argv`, or None when it parses (``--help`` counts as parsing)."""
    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(list(argv))
        except SystemExit as exit_:
            if exit_.code == 0 and {"-h", "--help"} & set(argv):
                return None
            return said.getvalue().strip() or f"exit {exit_.code}"
    return None


def _page_name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


COMMANDS = [c for page in PAGES for c in find_commands(page.read_text(encoding="utf-8"), _page_name(page))]


def test_the_finder_finds_the_documented_commands() -> None:
    pages = {c.where.split(":", 1)[0] for c in COMMANDS}
    assert len(COMMANDS) >= MIN_COMMANDS
    assert {"README.md", "docs/scoring-run-files.md", "docs/getting-started.md", "docs/importing-data.md"} <= pages


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_every_documented_command_parses(command: DocCommand) -> None:
    assert command.unreadable is None, f"{command.where}: {command.unreadable}"
    problem = parse_problem(build_parser(), command.argv)
    assert problem is None, f"{command}\n{problem}"


def test_inline_commands_in_the_prose_name_a_real_subcommand() -> None:
    subcommands = {
        name
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    }
    unknown = [
        f"{_page_name(page)}: `evalkit {rest}`"
        for page in PAGES
        for rest in INLINE_COMMAND.findall(page.read_text(encoding="utf-8"))
        if rest.split()[0] not in subcommands
    ]
    assert unknown == []


SAMPLE = """\
Some prose with `evalkit run --output` inline.

```sh
make eval                                   # = .venv/bin/evalkit notebook -p top_k 5
.venv/bin/evalkit score --qrels q.txt \\
    --run "a b.trec" --format trec          # trec_eval's layout, line for line
RAY_AUTH_MODE=token evalkit run --ray auto > out.txt && evalkit compare BASE HEAD
evalkit labels FILE
```

```python
evalkit --not-a-command
```
"""


def test_the_finder_reads_continuations_comments_environment_and_operators() -> None:
    found = [(c.where, c.argv) for c in find_commands(SAMPLE, "sample.md")]
    assert found == [
        ("sample.md:4", ("notebook", "-p", "top_k", "5")),
        ("sample.md:5", ("score", "--qrels", "q.txt", "--run", "a b.trec", "--format", "trec")),
        ("sample.md:7", ("run", "--ray", "auto")),
        ("sample.md:7", ("compare", "BASE", "HEAD")),
        ("sample.md:8", ("labels", "FILE")),
    ]


def test_the_parser_refuses_what_does_not_exist() -> None:
    parser = build_parser()
    assert parse_problem(parser, ("score", "--qrels", "q.txt", "--run", "r.trec", "--format", "trec")) is None
    assert parse_problem(parser, ("run", "--help")) is None
    assert parse_problem(parser, ("labels", "FILE")) is not None
    assert parse_problem(parser, ("pool", "--depth", "10")) is not None
    assert parse_problem(parser, ("score", "--qrels", "q.txt", "--run", "r.trec", "--format", "xml")) is not None
    assert parse_problem(parser, ("score", "--qrels", "q.txt")) is not None  # --run is required


def _json_blocks(text: str) -> list[str]:
    """The bodies of a page's fenced ``json`` blocks."""
    return re.findall(r"^```json\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_the_fixture_guide_examples_pass_the_schema() -> None:
    fixture_text, gates_text = _json_blocks(FIXTURE_GUIDE.read_text(encoding="utf-8"))
    fixture = parse_fixture(fixture_text, str(FIXTURE_GUIDE))
    answerable = [q.query_id for q in fixture.queries if q.answerable]
    assert (len(fixture.documents), len(fixture.chunks), len(fixture.queries), len(answerable)) == (2, 3, 5, 3)
    assert len(GateFile.model_validate_json(gates_text).gates) == 2
