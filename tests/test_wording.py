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


def test_the_builds_of_one_extension_module_for_several_pythons_are_one_name() -> None:
    # cvcuda-cu12 and nvidia-nvimgcodec-cu12 ship one build of their module per Python version: six names in every
    # "(in ...)" of a reason and on the start-up line, where one import loads one of them
    from cudatrace.wording import python_builds

    linux = [f"_cvcuda.cpython-{v}-x86_64-linux-gnu.so" for v in ("310", "311", "314t", "314")]
    assert python_builds(["libcvcuda.so.0", *linux, "libnvcv_types.so.0"]) == [
        "libcvcuda.so.0",
        "_cvcuda.cpython-{310,311,314,314t}-x86_64-linux-gnu.so",
        "libnvcv_types.so.0",
    ]
    windows = [f"nvimgcodec_impl.cp{v}-win_amd64.pyd" for v in ("310", "39", "312")]
    assert python_builds(windows) == ["nvimgcodec_impl.cp{39,310,312}-win_amd64.pyd"]
    # one build alone, other modules, and names without a Python tag stay as they are
    one = ["a.cpython-312-x86_64-linux-gnu.so", "b.cpython-311-x86_64-linux-gnu.so", "c.abi3.so", "libx.so.12"]
    assert python_builds(one) == one
