"""The fork tree of ``%fragola_tree``: ``view.ForkTree``, drawn by ``tree.js``/``tree.css``."""
