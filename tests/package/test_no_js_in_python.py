"""No JavaScript in a Python string (issue 35): the views' scripts are ``.js`` files of the
package (anywidget's ``_esm`` a path, the export page's script joined from files).

The rule, checked on every string literal of every ``.py`` file under ``fragola_nb`` (read with
``ast``; an f-string's replacement fields count as ``{}``):

- no ``<script ...>BODY</script>`` whose body is code: a body that is empty or one replacement
  field (``<script>{script}</script>``, the text read from a ``.js`` file) is allowed, and so
  is a data block (``type="application/json"``);
- none of the shapes only JavaScript has: ``function name(args) {``, ``(args) => {``/``x =>``
  after a parameter list, ``addEventListener(``, ``document.createElement(`` (or
  ``querySelector``, ``getElementById``), ``export default``, ``const``/``let``/``var x =``;
- no ``_esm`` (nor ``_css``) assigned a string: anywidget loads it from a file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "fragola_nb"
_SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.S | re.I)
_SHAPES = re.compile(
    r"\bfunction\b\s*[\w$]*\s*\([^()]*\)\s*\{"
    r"|\)\s*=>\s*[{(\w]"
    r"|\baddEventListener\s*\("
    r"|\bdocument\s*\.\s*(?:createElement|querySelector|getElementById)\w*\s*\("
    r"|\bexport\s+default\b"
    r"|\b(?:const|let|var)\s+[\w$]+\s*=[^=]")


def javascript_in(text: str) -> list[str]:
    """What makes ``text`` (a string literal's value) JavaScript, by the module's rule."""
    found = [m.group(0)[:60] for m in _SCRIPT.finditer(text)
             if "application/json" not in m.group(1) and m.group(2).strip() not in ("", "{}")]
    return found + [m.group(0) for m in _SHAPES.finditer(text)]


def literals(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal with its line; an f-string as one text, ``{}`` for its fields."""
    parts: list[tuple[int, str]] = []
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(str(v.value) if isinstance(v, ast.Constant) else "{}"
                           for v in node.values)
            parts.append((node.lineno, str(text)))
            inside.update(id(v) for v in node.values)
    parts += [(node.lineno, node.value) for node in ast.walk(tree)
              if isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in inside]
    return parts


def esm_strings(tree: ast.AST) -> list[int]:
    """The lines where ``_esm`` or ``_css`` is given a string."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in targets}
            if names & {"_esm", "_css"} and isinstance(node.value, (ast.Constant, ast.JoinedStr)):
                lines.append(node.lineno)
    return lines


def test_the_rule_finds_javascript_and_passes_prose_and_data() -> None:
    module = ast.parse(
        'class TreeView:\n'
        '    _esm = """\nfunction row(node) {\n  return 1;\n}\nexport default { render };\n"""\n'
        'PAGE = f"<script>{data}</script><script>draw({data});</script>"\n'
        'LIST = "el.addEventListener(\'click\', go)"\n'
        'DOC = "a dispose function (sync or async); the file\'s document. Let it be."\n'
        'SAFE = "``<script>`` shows as text"\n'
        'DATA = \'<script type="application/json" id="d">{"a": 1}</script>\'\n'
        'ARROW = "rows.map((r) => r.k)"\n')
    found = {line: javascript_in(text) for line, text in literals(module)}
    assert found[2] == ["function row(node) {", "export default"]
    assert found[8] == ["<script>draw({});</script>"]
    assert found[9] == ["addEventListener("]
    assert found[13] == [") => r"]
    assert found[10] == found[11] == found[12] == []
    assert esm_strings(module) == [2]


def test_no_javascript_in_a_python_string() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100
    found = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(PACKAGE)
        found += [f"{where}:{line} {js}" for line, text in literals(tree)
                  for js in javascript_in(text)]
        found += [f"{where}:{line} _esm/_css given a string" for line in esm_strings(tree)]
    assert found == []
