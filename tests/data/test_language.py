"""The language rule for texts that do not say theirs: Han characters against Latin words, and Chinese punctuation."""

from __future__ import annotations

import pytest

from evalkit.data.language import detect_language


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("MIT OpenCourseWare指什么？", "zh"),  # questions of the CMRC 2018 trial set
        ("《This Is Where I Came In》是Bee Gees的第几张原创专辑？", "zh"),
        ("iPhone 15 Pro Max 的 USB-C 接口支持 Thunderbolt 吗？", "zh"),
        ("在 Settings 中打开两步验证", "zh"),
        ("Open the 回收站 folder", "en"),
        ("Open the 回收站 folder (Recycle Bin).", "en"),
        ("Open the 回收站 folder（Recycle Bin）and click “清空”.", "en"),  # brackets and quotes borrowed
        ("Export notes to PDF?", "en"),
        ("１２３！", "en"),
        ("", "en"),
    ],
)
def test_a_text_is_read_as_its_language(text: str, language: str) -> None:
    assert detect_language(text) == language
