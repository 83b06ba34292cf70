"""``agent.evaluate`` in a notebook: the live matrix (``view.EvalView``,
``evaluation.js``/``evaluation.css``), what a live update sends (``live``), the verdicts and
flags it shows (``verdicts``), a row's trajectory (``trajectory``), and the
``%%fragola AGENT --evaluate CASES`` cell with the watcher that shows an evaluation (``cell``).
What it shares with the compare grid is in ``notebook.experiment``.
"""
