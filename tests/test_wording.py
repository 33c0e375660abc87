"""Counts and positions in words."""

from __future__ import annotations

import pytest

from cudatrace.wording import agrees, counted, ordinal


@pytest.mark.parametrize(
    ("n", "word"),
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th"), (21, "21st"),
     (22, "22nd"), (101, "101st"), (111, "111th"), (1234, "1,234th"), (1001, "1,001st")],
)  # fmt: skip
def test_positions_in_words(n: int, word: str) -> None:
    assert ordinal(n) == word


def test_counts_in_words() -> None:
    assert (counted(1, "entry point"), counted(2048, "entry point")) == ("1 entry point", "2,048 entry points")
    assert counted(2, "library", "libraries") == "2 libraries" and agrees(2, "is", "are") == "are"


def test_every_family_has_a_title() -> None:
    from cudatrace.model import Family
    from cudatrace.wording import FAMILY_TITLES

    assert set(FAMILY_TITLES) == {f.value for f in Family}
