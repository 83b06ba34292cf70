"""nbconvert's HTML of an executed notebook shows a panel's conversation, with or without the
widget state ``--execute`` stores (issue 24, item 4).

The panel's static copy is an output of its own (``fragola_nb.notebook.static.copy``): with
stored widget state, nbconvert's HTML exporter picks the panel's widget view for the view's
output (a view JSON that needs a CDN and anywidget's module) and still shows the copy.
``fragola_nb.notebook.static.static_views``, given to nbconvert as a preprocessor, also
leaves out the panel's widget view. Real ``jupyter nbconvert`` in a subprocess, a real
kernel, the scripted model (offline): the files are tests/support/saved_static_world.py's. The page
opened in Chromium: ``tests/browser/test_browser_saved_static.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from support.saved_static_world import PREPROCESSOR, make_files, nbconvert

pytestmark = pytest.mark.timeout(300)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_files(tmp_path_factory.mktemp("saved_static"))


def conversations(page: str) -> list[str]:
    """Each static copy in the page, up to the next output or the page's end."""
    return re.findall(r'<div class="fragola-conversation">.*?(?=jp-OutputArea-child|</body>)',
                      page, re.DOTALL)


def assert_shows_the_conversation(page: str) -> None:
    (shown,) = conversations(page)
    assert "geographer" in shown
    assert 'Is &lt;img src=x onerror="alert(1)"&gt; a capital?' in shown
    assert "No: &lt;script&gt;alert(2)&lt;/script&gt; &lt;b&gt;bold&lt;/b&gt; is not" in shown
    assert "<script" not in shown and "<img" not in shown and "<b>bold" not in shown


def test_executing_stores_the_panels_widget_state(files: dict[str, Path]) -> None:
    nb = json.loads(files["saved"].read_text(encoding="utf-8"))
    state = nb["metadata"]["widgets"][WIDGET_STATE]["state"]
    outputs = nb["cells"][1]["outputs"]
    (index,) = [i for i, o in enumerate(outputs) if WIDGET_VIEW in o.get("data", {})]
    assert outputs[index]["data"][WIDGET_VIEW]["model_id"] in state
    copy = outputs[index + 1]["data"]  # the static copy is in the file, the next output
    assert list(copy) == ["text/html"] and "fragola-static-copy" in "".join(copy["text/html"])


@pytest.mark.parametrize("name", ["saved-plain", "executed-plain"])
def test_plain_nbconvert_of_stored_widget_state_shows_the_conversation(
        files: dict[str, Path], name: str) -> None:
    # nbconvert alone draws the widget views (the panel's and the slider's) and the copy
    page = files[name].read_text(encoding="utf-8")
    assert_shows_the_conversation(page)
    assert page.count(f'<script type="{WIDGET_VIEW}">') == 2


@pytest.mark.parametrize("name", ["saved-static", "executed-static", "stateless-static",
                                  "stateless-plain"])
def test_the_html_shows_the_conversation_as_escaped_text(files: dict[str, Path],
                                                         name: str) -> None:
    page = files[name].read_text(encoding="utf-8")
    assert_shows_the_conversation(page)


@pytest.mark.parametrize("name", ["saved-static", "executed-static"])
def test_other_widgets_keep_their_view_and_state(files: dict[str, Path], name: str) -> None:
    page = files[name].read_text(encoding="utf-8")
    (view,) = re.findall(rf'<script type="{re.escape(WIDGET_VIEW)}">\s*(.*?)\s*</script>',
                         page, re.DOTALL)
    state = re.search(rf'<script type="{re.escape(WIDGET_STATE)}">\s*(.*?)\s*</script>',
                      page, re.DOTALL)
    assert state
    models = json.loads(state.group(1))["state"]
    assert models[json.loads(view)["model_id"]]["model_name"] == "IntSliderModel"


def test_without_other_widgets_the_page_loads_no_widget_manager(tmp_path: Path,
                                                                files: dict[str, Path]) -> None:
    nb = nbformat.read(str(files["saved"]), as_version=4)
    nb.cells = nb.cells[:2]  # no slider: only the panel's model is left to draw
    nbformat.write(nb, str(tmp_path / "panel.ipynb"))
    nbconvert("--to", "html", "panel.ipynb", f"--HTMLExporter.preprocessors={PREPROCESSOR}",
              cwd=tmp_path)
    page = (tmp_path / "panel.html").read_text(encoding="utf-8")
    assert_shows_the_conversation(page)
    assert WIDGET_VIEW not in page.replace("querySelector('script[type=", "")
    assert "html-manager" not in page and WIDGET_STATE not in page
    # the file itself is not changed by the export
    assert "widgets" in nbformat.read(str(tmp_path / "panel.ipynb"), as_version=4).metadata
