"""What a saved notebook keeps of the live views.

``copy``: each view is shown as two outputs, the widget and its escaped static copy (what
nbconvert, nbviewer, GitHub and an untrusted notebook show). ``views``: ``static_views``, the
nbconvert preprocessor that leaves the copies alone in the page::

    jupyter nbconvert --to html NB.ipynb \\
        --HTMLExporter.preprocessors=fragola_nb.notebook.static.static_views
"""

from __future__ import annotations

from fragola_nb.notebook.static.views import static_views

__all__ = ["static_views"]
