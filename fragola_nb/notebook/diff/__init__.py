"""``fragola_nb.diff(a, b)`` in a notebook: the paged view of a branch diff (``view.DiffView``,
``diffview.js``/``diffview.css``), shown in a cell and between the fork tree's branches."""
