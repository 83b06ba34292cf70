"""nbconvert's HTML of a notebook saved with widget state, without fragola_nb's widget views.

The magics show a live view and its static copy as two outputs (``copy``), so plain
nbconvert already shows the conversation. Its page still holds each live view's widget JSON
and, when the notebook's widget state is saved, loads ``@jupyter-widgets/html-manager`` from a
CDN to try to draw them. ``static_views`` is an nbconvert preprocessor (a plain function:
nbconvert calls it with the notebook and its resources) that drops the outputs of
fragola_nb's own widget views (older notebooks, whose view held its copy as ``text/html``,
keep that copy); other widgets keep theirs. When no widget view is left, the notebook's
widget state goes too, and with it the page's CDN loader::

    jupyter nbconvert --to html NB.ipynb \
        --HTMLExporter.preprocessors=fragola_nb.notebook.static.static_views

nbconvert loads no ``jupyter_nbconvert_config.d`` directory (only one
``jupyter_nbconvert_config.json`` or ``.py`` per config dir, which a package cannot share with
its user), so this is passed by flag or written in the user's own config file.
"""

from __future__ import annotations

from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
OURS = "fragola_nb."  # anywidget saves the widget class's dotted name as ``_anywidget_id``


def static_views(nb: Any, resources: Any) -> tuple[Any, Any]:
    """Keep the static copy of every fragola_nb view in place of its widget view.

    nbconvert hands its preprocessors a copy of the notebook: the file is not changed.
    """
    widgets = nb.get("metadata", {}).get("widgets") or {}
    state = (widgets.get(WIDGET_STATE) or {}).get("state") or {}
    left = 0
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        kept = []
        for output in cell.get("outputs", []):
            data = output.get("data") or {}
            if WIDGET_VIEW not in data:
                kept.append(output)
                continue
            model = state.get((data[WIDGET_VIEW] or {}).get("model_id"), {})
            anywidget_id = str((model.get("state") or {}).get("_anywidget_id", ""))
            if not anywidget_id.startswith(OURS):
                left += 1
                kept.append(output)
            elif "text/html" in data:  # an older notebook: the copy was in the same output
                del data[WIDGET_VIEW]
                kept.append(output)
            # else: the output is the live view alone; its copy is the next output
        cell["outputs"] = kept
    if widgets and not left:
        del nb["metadata"]["widgets"]
    return nb, resources
