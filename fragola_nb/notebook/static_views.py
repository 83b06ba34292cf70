"""nbconvert's HTML of a notebook saved with widget state: the panels' static copies.

A panel's display carries its live view (``application/vnd.jupyter.widget-view+json``) and a
static escaped copy of the conversation (``text/html``). nbconvert's HTML exporter picks the
widget view whenever the notebook's saved widget state holds the view's model (``jupyter
nbconvert --execute`` saves it; so does JupyterLab with "Save Widget State Automatically"),
and the page then needs ``@jupyter-widgets/html-manager`` from a CDN and anywidget's module to
draw it: offline, the conversation is not there at all.

``static_views`` is an nbconvert preprocessor (a plain function: nbconvert calls it with the
notebook and its resources) that drops the widget view of fragola_nb's own displays, so the
exporter falls back to their static copy; other widgets keep theirs. When no widget view is
left, the notebook's widget state goes too, and with it the page's CDN loader::

    jupyter nbconvert --to html NB.ipynb \
        --HTMLExporter.preprocessors=fragola_nb.notebook.static_views.static_views

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
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = output.get("data") or {}
            if WIDGET_VIEW not in data:
                continue
            model = state.get((data[WIDGET_VIEW] or {}).get("model_id"), {})
            anywidget_id = str((model.get("state") or {}).get("_anywidget_id", ""))
            if anywidget_id.startswith(OURS) and "text/html" in data:
                del data[WIDGET_VIEW]
            else:
                left += 1
    if widgets and not left:
        del nb["metadata"]["widgets"]
    return nb, resources
