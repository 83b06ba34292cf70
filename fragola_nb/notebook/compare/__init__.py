"""``agent.compare`` in a notebook: the live grid (``view.CompareView``,
``compare.js``/``compare.css``), the word-level differences it shows (``worddiff``), and the
``%%fragola AGENT --compare VARIANTS`` cell with the watcher that shows a comparison
(``cell``). What it shares with the evaluation's matrix is in ``notebook.experiment``.
"""
