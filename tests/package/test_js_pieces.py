"""The JavaScript comes in small pieces (issue 35, item 5): no function in a ``.js`` file of the
package is over ``LONGEST`` lines.

The functions are found by a small scanner (comments, strings, template literals and regular
expressions skipped): a body is a ``{`` after ``=>``, or after the ``)`` of a parameter list
that follows ``function``, a function's name or a method's name (not ``if``, ``for``, ``while``,
``switch``, ``catch``), and it runs to its matching ``}``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "fragola_nb"
LONGEST = 200
_WORD = re.compile(r"[A-Za-z_$][\w$]*")
_NOT_A_FUNCTION = {"if", "for", "while", "switch", "catch", "with"}
# after these, a "/" starts a regular expression, not a division
_BEFORE_REGEX = set("(,=:[!&|?{};+-*%<>~^") | {"return", "typeof", "case", "in", "of", "new",
                                             "delete", "void", "throw", ""}


@dataclass(frozen=True)
class Token:
    text: str
    line: int


def _skip_quoted(src: str, i: int, quote: str) -> int:
    """The index after the string (or regular expression) opened at ``i``."""
    i += 1
    in_class = False
    while i < len(src) and (src[i] != quote or in_class):
        if src[i] == "\\":
            i += 1
        elif quote == "/" and src[i] in "[]":
            in_class = src[i] == "["
        i += 1
    return i + 1


def tokens(src: str) -> list[Token]:
    """Words and punctuation with their line numbers; the insides of comments, strings and
    regular expressions left out; a template literal's ``${...}`` kept as code."""
    out: list[Token] = []
    templates: list[int] = []  # brace depth at each open ${
    depth = 0
    i = 0
    while i < len(src):
        c = src[i]
        line = src.count("\n", 0, i) + 1
        if src.startswith("//", i):
            i = src.find("\n", i) if "\n" in src[i:] else len(src)
        elif src.startswith("/*", i):
            i = src.index("*/", i) + 2
        elif c in "'\"":
            i = _skip_quoted(src, i, c)
        elif c == "`" or (c == "}" and templates and templates[-1] == depth):
            if c == "}":
                templates.pop()
            i += 1
            while src[i] != "`" and not src.startswith("${", i):
                i += 2 if src[i] == "\\" else 1
            if src[i] == "`":
                i += 1
            else:
                templates.append(depth)
                i += 2
        elif c == "/" and (out[-1].text if out else "") in _BEFORE_REGEX:
            i = _skip_quoted(src, i, "/")
            while i < len(src) and src[i].isalpha():  # its flags
                i += 1
        elif (word := _WORD.match(src, i)) is not None:
            out.append(Token(word.group(), line))
            i = word.end()
        elif src.startswith("=>", i):
            out.append(Token("=>", line))
            i += 2
        else:
            if not c.isspace():
                out.append(Token(c, line))
                depth += {"{": 1, "}": -1}.get(c, 0)
            i += 1
    return out


def functions(src: str) -> list[tuple[str, int, int]]:
    """Every function body as (name, first line, number of lines)."""
    toks = tokens(src)
    found: list[tuple[str, int, int]] = []
    parens: dict[int, int] = {}  # index of ")" -> index of its "("
    open_parens: list[int] = []
    open_bodies: list[tuple[str, int] | None] = []
    for n, tok in enumerate(toks):
        if tok.text == "(":
            open_parens.append(n)
        elif tok.text == ")" and open_parens:
            parens[n] = open_parens.pop()
        elif tok.text == "{":
            open_bodies.append(_body(toks, n, parens))
        elif tok.text == "}" and open_bodies:
            body = open_bodies.pop()
            if body is not None:
                found.append((body[0], body[1], tok.line - body[1] + 1))
    return found


def _body(toks: list[Token], n: int, parens: dict[int, int]) -> tuple[str, int] | None:
    before = toks[n - 1].text if n else ""
    if before == "=>":
        return ("(arrow)", toks[n].line)
    if before != ")" or parens.get(n - 1, 0) == 0:
        return None
    name = toks[parens[n - 1] - 1].text
    if name in _NOT_A_FUNCTION or not _WORD.fullmatch(name):
        return None
    return (name, toks[n].line)


def test_the_scanner_finds_functions_and_skips_what_is_not_code() -> None:
    src = (
        "// function fake() {\n"
        "const a = /[}{]/g, b = \"{\", c = `${x + {y: 1}.y} }`;\n"
        "function one(x) {\n"
        "  if (x) { return x / 2; }\n"
        "  for (const y of [1]) { b; }\n"
        "}\n"
        "const two = (y) => {\n"
        "  return { y };\n"
        "};\n"
        "class K { three() {\n"
        "  return 1; } }\n"
    )
    assert functions(src) == [("one", 3, 4), ("(arrow)", 7, 3), ("three", 10, 2)]


def test_every_javascript_function_is_at_most_200_lines() -> None:
    files = sorted(PACKAGE.rglob("*.js"))
    assert files, "no .js file found under fragola_nb"
    long = [f"{path.relative_to(PACKAGE)}:{line} {name} ({size} lines)"
            for path in files
            for name, line, size in functions(path.read_text(encoding="utf-8"))
            if size > LONGEST]
    assert long == []



def test_every_widget_module_declares_its_commands_and_a_pure_update() -> None:
    """Each anywidget module (a ``.js`` file with ``export default``: the panel, compare,
    evaluation, diff and tree views) exports a frozen ``COMMANDS`` table, each entry naming the
    exported function that takes it, and an ``update``. The export page's scripts
    (sessions/html*.js) are one classic script that no kernel talks to: no table."""
    widgets = [p for p in sorted(PACKAGE.rglob("*.js"))
               if "export default" in p.read_text(encoding="utf-8")]
    assert {p.stem for p in widgets} == {"panel", "compare", "evaluation", "diffview", "tree"}
    for path in widgets:
        src = path.read_text(encoding="utf-8")
        table = re.search(r"export const COMMANDS = Object\.freeze\(\{\n(.*?)\n\}\);", src, re.S)
        assert table is not None, path.name
        takers = set(re.findall(r"^  \w+: \{ by: \"(\w+)\", says: ", table.group(1), re.M))
        assert takers and "update" in takers, path.name
        for name in takers:
            assert re.search(rf"^export (?:function {name}\(|const {name} = )", src, re.M), name
