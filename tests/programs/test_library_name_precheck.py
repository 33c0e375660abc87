"""The text test that spares grouping the walk of a file's tree for library-name constants.

It may let a file through that names no library (the walk then finds nothing); it must never stop one whose
constants name one. Checked on the ways a constant's text can be cut or spelled (implicit concatenation, f-string
fields and format specs, the pattern's case folding), on generated sources, on the Python files of the standard
library, and on input built to make a backtracking pattern take quadratic time."""

from __future__ import annotations

import ast
import random
import sysconfig
import warnings
from pathlib import Path

import pytest

from cudatrace.programs.grouping import _imports_of, _library_lines, _library_names


def _may_name_library(text: str) -> bool:
    return bool(_library_lines(text))


def _walked(text: str) -> frozenset[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes in the generated literals
        return _library_names(ast.parse(text))


@pytest.mark.parametrize(
    "text",
    [
        "x = 'libfoo.so'\n",
        "x = 'libfoo.so.12.4'\n",
        "x = 'lib' 'foo.' 'so'\n",
        "x = ('libfoo.s'  # cut\n     'o')\n",
        "x = 'libfoo.so' '.12'\n",
        "x = 'libfoo.so.' '12'\n",
        "x = 'libfoo.s' 'o.12'\n",
        "x = 'libfoo.' 's' 'o' ''\n",
        "x = 'nvcuda.d' 'll'\n",
        "x = 'nvcuda.dl' 'l'\n",
        "x = 'libcuda.dyl' 'ib'\n",
        "x = 'libcuda.dyli' 'b'\n",
        "x = 'libcuda.dy' 'lib'\n",
        "x = '_C.p' 'yd'\n",
        "x = '_C.py' 'd'\n",
        "x = f'{d}/libfoo.so'\n",
        "x = 'libfoo.s' f'o{d}'\n",
        "x = f'{d:libfoo.so}'\n",
        "x = f'{{/libfoo.s' 'o'\n",
        "x = 'LIBFOO.SO'\n",
        "x = 'libfoo.\u017fo'\n",
        "x = 'libfoo.s' '\u017f'[:0] + 'y'\n",  # not a name: the precheck may still let it through
        "x = 'libcuda.dyl\u0130b'\n",
        "x = 'libcuda.dyl' '\u0131b'\n",
        "x = '''libfoo.s''' '''o'''\n",
        "x = r'lib' 'foo.so'\n",
        "x = 'a\\x2eso'\n",
        "x = 'a.\\x73o'\n",
        "x = 'a.\\N{LATIN SMALL LETTER S}o'\n",
        "x = 'a.s\\\no'\n",
        "x = 'a\\56so'\n",
    ],
)
def test_a_file_whose_constants_name_a_library_is_walked(text: str) -> None:
    try:
        names = _walked(text)
    except SyntaxError:
        pytest.skip("not Python on this version")
    if names:
        assert _may_name_library(text), text
        assert _imports_of(text, "m", False).library_names == names


@pytest.mark.parametrize(
    "text",
    [
        "import os\n\ndef f(a, b):\n    return os.path.join(a, b)\n",
        "x = 'so'\ny = 'dll'\n",  # no dot before: no name
        "x = obj.sort()\ny = 'o'\n",  # text the precheck lets through, constants that name nothing
    ],
)
def test_a_file_that_names_nothing_gives_no_names(text: str) -> None:
    assert _walked(text) == frozenset()
    assert _imports_of(text, "m", False).library_names == frozenset()


def test_most_plain_files_are_not_walked() -> None:
    # Without this the precheck would be a test that cannot fail the other way: it lets everything through.
    assert not _may_name_library("import os\n\ndef f(a, b):\n    return os.path.join(a, b)\n")
    assert not _may_name_library("x = 'sox'\ny = 'dlls'\nz = f'{a}.{b}'\n")
    assert not _may_name_library("x = 'lib.sx' + 'ox'\n")
    assert _may_name_library("x = 'lib.s' 'o'\n")


_PIECES = ["lib", "foo", ".", "s", "S", "\u017f", "o", "O", "d", "l", "y", "i", "\u0130", "\u0131", "b", "p",
           "1", "12", "/", "-", "+", "{a}", "{a:.s}", "{a:x.so}", "{{", "}}", " ",
           "\\x2e", "\\x73", "\\x6F", "\\56", "\\157", "\\u0064", "\\U0000006c", "\\N{FULL STOP}",
           "\\N{latin small letter o}", "\\\n", "\\\\", "\\n", "\\'", "\\x41",
           "\\N{LATIN SMALL LETTER LONG S}"]  # fmt: skip
_GLUE = [" ", "", "\n    ", "  # so\n    ", " # 'o'\n    "]


def _generated(rng: random.Random) -> str:
    literals = []
    for _ in range(rng.randint(1, 4)):
        prefix = rng.choice(["", "", "", "f", "r", "u", "F", "rf", "R"])
        quote = rng.choice(["'", '"', "'''", '"""'])
        body = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 5)))
        if "f" not in prefix.lower():
            body = body.replace("{", "").replace("}", "")
        literals.append(prefix + quote + body + quote)
    glue = rng.choice(_GLUE)
    return "x = (" + glue.join(literals) + ")\n"


def test_generated_sources_that_name_a_library_are_never_skipped() -> None:
    rng = random.Random(1207)
    named = escaped = 0
    for _ in range(30000):
        text = _generated(rng)
        try:
            names = _walked(text)
        except SyntaxError:
            continue
        if names:
            named += 1
            escaped += "\\" in text
            assert _may_name_library(text), text
    assert named > 500 and escaped > 100  # the generator reaches the cases it is for


def test_the_standard_library_files_that_name_a_library_are_all_walked() -> None:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(root.glob("*.py")) + sorted((root / "ctypes").rglob("*.py"))
    named = skipped = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            names = _walked(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        named += bool(names)
        skipped += not _may_name_library(text)
        if names:
            assert _may_name_library(text), path
    assert named >= 2  # ctypes/util.py and others spell lib%s.so, libc.so.6, ...
    assert skipped >= 10


def test_the_precheck_is_linear_on_text_built_against_backtracking() -> None:
    # A backtracking pattern over long runs of these takes quadratic time (hours for this size); each of these
    # must be a single linear pass. A regression here hangs the test rather than failing it.
    size = 2_000_000
    for text in (
        "'o" + ".1" * (size // 2),
        "'o" * (size // 2),
        "." * size,
        "'" * size,
        "'s" + "." * size,
        '"o.1111111111' * (size // 13),
        ".s" * (size // 2),
    ):
        assert _may_name_library(text) in (True, False)
        assert _may_name_library(text + "'lib.so'")


# Statements around a generated constant: a decorator above its def's line, two statements on a line, a line
# continued with a backslash, bodies nested in a class, a try and a match.
_FRAMES = [
    "{x}",
    "import os\n{x}\nimport sys\n",
    "@deco({e})\ndef f():\n    return 1\n",
    "class C:\n    a = 1\n\n    @property\n    def p(self):\n        return {e}\n",
    "a = 1; {x}",
    "a = 1 + \\\n    2; {x}b = 3\n",
    "try:\n    pass\nexcept Exception:\n    {x}finally:\n    c = 2\n",
    "if a:\n    b = (1,\n         2)\nelse:\n    {x}",
    "match a:\n    case 1:\n        {x}    case _:\n        pass\n",
    "def g(x={e}, *, y=2):\n    pass\n",
    "with open(p) as f:\n    {x}",
    "lambda: None\n{x}# so\n",
]


def test_a_walk_that_passes_over_statements_on_other_lines_finds_the_same_names() -> None:
    rng = random.Random(712)
    named = pruned_some = 0
    for n in range(20000):
        x = _generated(rng)
        frame = rng.choice(_FRAMES)
        text = rng.choice(_FRAMES[:3]).format(x="y = 1\n", e="0") + frame.format(x=x, e=x[4:].strip())
        if n % 5 == 0:
            text = text.replace("\n", rng.choice(["\r\n", "\r"]))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
        except SyntaxError:
            continue
        names = _library_names(tree)
        lines = _library_lines(text)
        named += bool(names)
        if names:
            assert _library_names(tree, lines) == names, text
        pruned_some += len(set(lines)) < len(text.splitlines())
    assert named > 500 and pruned_some > 1000


def test_the_statements_off_the_lines_are_passed_over() -> None:
    # the mechanism the test above relies on: given lines, a statement that holds none of them is not walked
    text = "a = 'libfoo.so'\nb = 1\nc = 'libbar.so'\n"
    tree = ast.parse(text)
    assert _library_lines(text) == [1, 3]
    assert _library_names(tree, [1, 3]) == {"libfoo.so", "libbar.so"}
    assert _library_names(tree, [3]) == {"libbar.so"}
    assert _library_names(tree, [1]) == {"libfoo.so"}
    assert _library_names(ast.parse("a = 'libfoo.so'\n\n\nb = 1\n"), [2]) == frozenset()


def test_lines_joined_by_a_backslash_are_each_a_line_of_the_hit() -> None:
    text = "x = 1\ny = ('lib.s\\\no' +\n     'z')\nz = 2\n"
    assert _library_lines(text) == [2, 3]
    assert _library_lines("a = 1\r\nb = 'x.dll'\r\n") == [2]
    assert _library_lines("a = 1\rb = 'x.dll'\r") == [2]
    assert _library_lines("import os\n") == []


def test_the_standard_library_walked_by_lines_finds_the_same_names() -> None:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(root.glob("*.py")) + sorted((root / "ctypes").rglob("*.py"))
    named = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        names = _library_names(tree)
        named += bool(names)
        assert _library_names(tree, _library_lines(text)) == names, path
    assert named >= 2
