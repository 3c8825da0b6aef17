"""Tests for evalkit.data.schema: the strict base model, constrained types and the privacy rules."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from evalkit.data.collection import CollectionOptions
from evalkit.data.fixture import Fixture
from evalkit.data.schema import (
    MAX_CHUNK_LENGTH,
    MAX_ID_LENGTH,
    MAX_QUERY_LENGTH,
    MAX_TITLE_LENGTH,
    ChunkText,
    Grade,
    Identifier,
    Offset,
    QueryText,
    SafeText,
    SemanticVersion,
    StrictModel,
    Title,
    UnitFloat,
    is_identifier,
    privacy_problem,
)
from evalkit.data.squad import SquadImportOptions

URL = "a URL or endpoint"
EMAIL = "an e-mail address"
HOST = "a host address"
PATH = "a filesystem path"
SECRET = "a secret (API key, token or private key)"
LABELS = {URL, EMAIL, HOST, PATH, SECRET}

# --- privacy rules ---------------------------------------------------------------------------------------------

PRIVATE_VALUES = [
    ("/etc/passwd", PATH),
    ("see /etc/passwd for users", PATH),
    ("~/x", PATH),
    ("open ~/notes/today.md", PATH),
    ("./a/b", PATH),
    ("../secrets.txt", PATH),
    ('config="/srv/app/config.yaml"', PATH),
    ("C:\\x", PATH),
    ("saved in D:\\Users\\me\\notes", PATH),
    ("\\\\fileserver\\share", PATH),
    ("http://example.org", URL),
    ("see https://intranet.example/wiki", URL),
    ("ftp://files", URL),
    ("www.x.com", URL),
    ("visit www.example.org today", URL),
    ("host.com:8080", URL),
    ("db.internal.corp:5432", URL),
    ("alice@example.com", EMAIL),
    ("write to first.last+kb@mail.example.org please", EMAIL),
    ("localhost", HOST),
    ("localhost:8080", HOST),
    ("10.0.0.1", HOST),
    ("connect to 192.168.1.20:22", HOST),
    ("sk-live-" + "a1B2" * 5, SECRET),
    ("sk_test_" + "Z" * 16, SECRET),
    ("Bearer abc123def456ghi", SECRET),
    ("Authorization: bearer eyJhbGciOiJIUzI1NiJ9", SECRET),
    ("AKIA" + "ABCDEFGHIJ234567", SECRET),
    ("-----BEGIN RSA PRIVATE KEY-----", SECRET),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", SECRET),
    ("ghp_" + "x" * 36, SECRET),
    ("xoxb-1234567890-abcdef", SECRET),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig", SECRET),
    ("api_key=abcdef123456", SECRET),
    ("API-KEY: 0123456789abcdef", SECRET),
    ("password = hunter2hunter2", SECRET),
]

# The same values inside Chinese text, where Python's Unicode \b finds no boundary between a Chinese character and a
# Latin letter (regression: all of these used to pass).
CHINESE_ADJACENT = [
    ("文件在/etc/passwd", PATH),
    ("配置文件位于：/etc/app/config.yaml", PATH),
    ("见~/notes", PATH),
    ("保存在C:\\Users\\me", PATH),
    ("网址www.example.com", URL),
    ("访问host.com:8080端口", URL),
    ("服务器localhost:8080", HOST),
    ("地址192.168.1.1号", HOST),
    ("密钥sk-live-" + "a" * 20 + "已轮换", SECRET),
    ("令牌ghp_" + "a" * 30, SECRET),
    ("密钥AKIA" + "A" * 16 + "已失效", SECRET),
    ("配置api_key=abcdef123", SECRET),
    ("api_key：abcdef123", SECRET),
    ("联系alice@example.com", EMAIL),
]

INNOCENT_TEXTS = [
    "Settings › Export",
    "version 2.3",
    "version 2.3.1",
    "3/4 of users",
    "per 1/2 hour",
    "24/7 support",
    "and/or",
    "TCP/IP",
    "+/- 5%",
    "Ctrl+/ opens the shortcut list",
    "price: $5/month",
    "Sync runs at 10:30 every day",
    "API keys are rotated every 90 days",
    "Use an API key to call the service.",
    "Tokens expire after 30 days.",
    "The password must be at least 12 characters long.",
    "Mention a teammate with @alice",
    "e.g. 1.5x faster than before",
    "example.com",
    "https",
    "Deleted notes stay in the trash for 30 days.",
    "笔记可以导出为 PDF 或 Markdown 格式。导出功能只在桌面端提供。",
    "年度订阅在购买后 14 天内可以申请全额退款（仅限首次购买）。",
    "设置 › 导出：选择「全部笔记」，然后点击“确定”！",
    "和/或",
    "界面语言：中文/English",
    "每 3/4 小时同步一次",
    "打开设置/导出",
    "Type /help in the chat box",
    "$5 /month",
    "每年损失约 8,646平方英里 /年",
    "110英里 /小时",
]

# Harmless texts the rules refuse on purpose; privacy_problem's docstring documents each kind.
DOCUMENTED_OVER_REJECTIONS = [
    ("格式/PDF/HTML", PATH),
    ("version 1.2.3.4", HOST),
    ("see README.md:12", URL),
    ("Password: minimum 8 characters", SECRET),
    ("payable to the bearer whenever presented", SECRET),
]


@pytest.mark.parametrize(("value", "label"), PRIVATE_VALUES + CHINESE_ADJACENT)
def test_private_value_is_named(value: str, label: str) -> None:
    assert privacy_problem(value) == label


@pytest.mark.parametrize("value", INNOCENT_TEXTS)
def test_innocent_text_passes(value: str) -> None:
    assert privacy_problem(value) is None


@pytest.mark.parametrize(("value", "label"), DOCUMENTED_OVER_REJECTIONS)
def test_documented_over_rejection(value: str, label: str) -> None:
    assert privacy_problem(value) == label


def test_docstring_documents_each_over_rejection_kind() -> None:
    doc = privacy_problem.__doc__ or ""
    for example in ("1.2.3.4", "README.md:12", "Password: minimum 8 characters", "bearer", "格式/PDF/HTML"):
        assert example in doc


@pytest.mark.parametrize(
    ("value", "label"),
    [
        ("a." * 10_000, None),
        ("a.-" * 6_666, None),
        ("a" * 20_000, None),
        ("1." * 10_000, None),  # four dotted numbers inside a longer dotted token are not an address
        ("1." * 10_000 + " 10.0.0.1", HOST),
        ("x@" * 10_000, None),
        ("中" * 20_000, None),
        ("\\\\a" * 6_000, PATH),
    ],
)
def test_long_runs_are_classified(value: str, label: str | None) -> None:
    # These runs once took up to 5 s each (quadratic scans; now linear). Speed is not asserted here (no timed
    # tests); the labels are, so a rewrite for speed cannot change what is refused.
    assert privacy_problem(value) == label


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_privacy_problem_returns_none_or_a_label(value: str) -> None:
    assert privacy_problem(value) in LABELS | {None}


_CHINESE_CONTEXT = st.text(alphabet="中文笔记导出同步设置，。：；（）「」“”！？　 ", max_size=12)


@given(
    prefix=_CHINESE_CONTEXT,
    suffix=_CHINESE_CONTEXT,
    private=st.sampled_from(PRIVATE_VALUES),
)
@settings(max_examples=150, deadline=None)
def test_private_value_is_found_in_any_chinese_context(prefix: str, suffix: str, private: tuple[str, str]) -> None:
    value, label = private
    assert privacy_problem(prefix + value + suffix) == label


# --- SafeText and the bounded texts ----------------------------------------------------------------------------


def _validate(annotation: Any, value: object) -> object:
    return TypeAdapter(annotation).validate_python(value, strict=True)


@pytest.mark.parametrize("value", ["", " ", "\n\t", "\u3000"])
def test_safe_text_refuses_blank(value: str) -> None:
    with pytest.raises(ValidationError, match="must not be blank"):
        _validate(SafeText, value)


def test_safe_text_refusal_names_the_kind_of_value() -> None:
    with pytest.raises(ValidationError, match="looks like a filesystem path; fixtures must not carry paths"):
        _validate(SafeText, "/etc/passwd")


@pytest.mark.parametrize(
    ("annotation", "limit"),
    [(Title, MAX_TITLE_LENGTH), (ChunkText, MAX_CHUNK_LENGTH), (QueryText, MAX_QUERY_LENGTH)],
)
def test_bounded_text_accepts_its_limit_and_refuses_one_more(annotation: Any, limit: int) -> None:
    assert _validate(annotation, "a" * limit) == "a" * limit
    with pytest.raises(ValidationError, match=f"String should have at most {limit} characters"):
        _validate(annotation, "a" * (limit + 1))


@pytest.mark.parametrize("annotation", [Title, ChunkText, QueryText])
def test_bounded_text_keeps_the_privacy_rule(annotation: Any) -> None:
    with pytest.raises(ValidationError, match="looks like an e-mail address"):
        _validate(annotation, "mail alice@example.com")


# --- Identifier --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["a", "Q1", "en-trash-01", "q.en.001", "ns:doc_1", "0", "a" * MAX_ID_LENGTH])
def test_identifier_accepts(value: str) -> None:
    assert _validate(Identifier, value) == value
    assert is_identifier(value)


@pytest.mark.parametrize(
    "value",
    ["", "-a", ".a", "_a", "a b", "a/b", "a\\b", "a\n", "é", "文档", "a" * (MAX_ID_LENGTH + 1), "a'b", "a@b"],
)
def test_identifier_refuses(value: str) -> None:
    with pytest.raises(ValidationError):
        _validate(Identifier, value)
    assert not is_identifier(value)


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=MAX_ID_LENGTH + 3) | st.text(max_size=6))
@settings(max_examples=200, deadline=None)
def test_is_identifier_agrees_with_the_identifier_type(value: str) -> None:
    try:
        _validate(Identifier, value)
    except ValidationError:
        valid = False
    else:
        valid = True
    assert is_identifier(value) is valid


# --- numeric types ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "ok"), [(0, True), (1, True), (2, True), (3, True), (4, False), (-1, False)])
def test_grade_bounds(value: int, ok: bool) -> None:
    if ok:
        assert _validate(Grade, value) == value
    else:
        with pytest.raises(ValidationError):
            _validate(Grade, value)


@pytest.mark.parametrize("value", ["3", 3.0, True])
def test_grade_is_strictly_an_int(value: object) -> None:
    with pytest.raises(ValidationError):
        _validate(Grade, value)


@pytest.mark.parametrize(
    ("value", "ok"), [(0, True), (MAX_CHUNK_LENGTH, True), (-1, False), (MAX_CHUNK_LENGTH + 1, False)]
)
def test_offset_bounds(value: int, ok: bool) -> None:
    if ok:
        assert _validate(Offset, value) == value
    else:
        with pytest.raises(ValidationError):
            _validate(Offset, value)


@pytest.mark.parametrize(("value", "ok"), [(0.0, True), (1.0, True), (0.5, True), (-0.01, False), (1.01, False)])
def test_unit_float_bounds(value: float, ok: bool) -> None:
    if ok:
        assert _validate(UnitFloat, value) == value
    else:
        with pytest.raises(ValidationError):
            _validate(UnitFloat, value)


# --- StrictModel ----------------------------------------------------------------------------------------------


class _Point(StrictModel):
    x: int


def test_strict_model_forbids_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        _Point.model_validate({"x": 1, "y": 2})


def test_strict_model_does_not_coerce() -> None:
    with pytest.raises(ValidationError, match="valid integer"):
        _Point.model_validate({"x": "1"})
    with pytest.raises(ValidationError, match="valid integer"):
        _Point.model_validate_json('{"x": 1.0}')


def test_strict_model_is_frozen() -> None:
    point = _Point(x=1)
    with pytest.raises(ValidationError, match="frozen"):
        point.x = 2  # type: ignore[misc]
    assert point.x == 1


# --- the substring prefilter of the privacy rules changes no verdict -------------------------------------------

_PREFILTER_FRAGMENTS = [
    "://",
    "www.",
    "@",
    ".",
    "/",
    "\\",
    ":",
    "localhost",
    "-----BEGIN RSA PRIVATE KEY-----",
    "Bearer ",
    "sk_live_",
    "pk-",
    "AKIA",
    "ghp_",
    "xoxb-",
    "eyJ",
    "api_key=",
    "Secret: ",
    "TOKEN=",
    "passwd:",
    "AIza",
    "ya29.",
    "glpat-",
    "github_pat_",
    "sk-proj-",
    "hf_",
    "npm_",
    "pypi-AgE",
    "xapp-1-",
    "SG.",
    "shpat_",
    "dop_v1_",
    "ASIA",
    "\u0130",
    "\u0131",
    "\u017f",
    "\u212a",
    "a",
    "Z",
    "0",
    "9",
    " ",
    "中文",
    "_",
    "-",
    "=",
]


def _full_scan(value: str, allow_links: bool = False) -> str | None:
    from evalkit.data.schema import _LINK_RULES, _PRIVACY_RULES

    for label, pattern in _PRIVACY_RULES:
        if (not allow_links or pattern in _LINK_RULES) and pattern.search(value):
            return label
    return None


@settings(max_examples=3000)
@given(st.lists(st.sampled_from(_PREFILTER_FRAGMENTS) | st.text(max_size=3), max_size=40), st.booleans())
def test_prefilter_gives_the_verdict_of_a_full_scan(parts: list[str], allow_links: bool) -> None:
    value = "".join(parts)
    assert privacy_problem(value, allow_links=allow_links) == _full_scan(value, allow_links)


@pytest.mark.parametrize(
    "value",
    [
        "-----BEGIN PR\u0130VATE KEY-----",
        "pa\u017f\u017fword: hunter22",
        "AK\u0131A" + "A" * 16,
        "xox\u212a-" + "a" * 12,
        "token=abcdefgh",
        "mail me at a@b.co",
    ],
)
def test_prefilter_keeps_case_insensitive_look_alikes(value: str) -> None:
    assert privacy_problem(value) == _full_scan(value)


@pytest.mark.parametrize("value", ["١.٠.٠", "1.0.０", "1.߀.0", "1.0", "1.0.0-rc1"])
def test_a_version_with_a_non_ascii_digit_or_another_shape_is_refused(value: str) -> None:
    """One version pattern, ASCII digits only: ``\\d`` would accept Arabic-Indic, full-width or NKo digits."""
    assert TypeAdapter(SemanticVersion).validate_python("1.10.0") == "1.10.0"
    with pytest.raises(ValidationError):
        TypeAdapter(SemanticVersion).validate_python(value)
    base: dict[str, Any] = {"fixture_id": "x", "license": "CC0-1.0", "attribution": "Test data."}
    for options in (CollectionOptions(**base), SquadImportOptions(language="en", **base)):
        assert options.fixture_version == "1.0.0"
        with pytest.raises(ValidationError, match="fixture_version"):
            type(options).model_validate({**options.model_dump(), "fixture_version": value})
    with pytest.raises(ValidationError, match="fixture_version"):
        Fixture.model_validate({"fixture_version": value})


_PIECES = [
    *("http", "://", "www.", ".", ":", "@", "/", "\\", "localhost", "8080", "sk-", "ghp_", "AKIA", "gl", "hf_"),
    *("password: ", "token=", "bearer ", "abcdefgh12345678", "İ", "ı", "ſ", "K", "笔记", "/etc/passwd", "10.0.0.1"),
    *("a", "Z", "0", "9", " ", "-", "_", "README.md:12", "2.3.1", "C:\\Users", "user@example.com"),
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join), st.booleans())
def test_privacy_verdicts_equal_scanning_every_rule(value: str, allow_links: bool) -> None:
    """The substring prefilters (one scan of every rule's substrings, then each rule's own) only skip rules that
    cannot match: the verdict is the first rule whose pattern matches, as a scan of every rule gives it."""
    from evalkit.data.schema import _LINK_RULES, _PRIVACY_RULES, privacy_problem

    rules = [(label, p) for label, p in _PRIVACY_RULES if not allow_links or p in _LINK_RULES]
    expected = next((label for label, pattern in rules if pattern.search(value)), None)
    assert privacy_problem(value, allow_links=allow_links) == expected
