"""Sessions and exports: a tree of agents saved to one JSON file and loaded back, and
conversations written as Markdown or standalone HTML.

``session`` holds the public functions (``save_session``, ``load_session``, ``Session``);
``schema`` the file format and its strict parsing; ``save`` and ``load`` turn live agents
into the document and back; ``export`` writes the readable copies (``markdown`` keeps any
message from reshaping a Markdown transcript); ``htmlexport`` writes a run (an agent's tree, and
any kind a layer above registers: a comparison, a batch) as one self-contained HTML file to
browse without a kernel; ``atomic``
writes any of these files whole or not at all, replacing a symbolic link rather than writing
through it. Credentials in model settings are left out of session files (and exports) by the
one rule of ``fragola_nb.base.redact``.
"""

from __future__ import annotations

from fragola_nb.sessions.export import export_markdown, export_tree_html, export_tree_markdown
from fragola_nb.sessions.htmlexport import export_html
from fragola_nb.sessions.session import (
    Session,
    load_session,
    save_session,
    session_from_json,
    session_to_json,
)

__all__ = [
    "Session",
    "export_html",
    "export_markdown",
    "export_tree_html",
    "export_tree_markdown",
    "load_session",
    "save_session",
    "session_from_json",
    "session_to_json",
]

