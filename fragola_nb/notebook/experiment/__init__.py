"""What the compare grid (``notebook.compare``) and the evaluation's matrix
(``notebook.evaluate``) share, so each says only what is its own.

``view``: the widget that answers its page's hello (``LiveWidget``) and the view of an
experiment (``ExperimentView``): its drawing above, the panel of the fork a click picks below,
detached and closed together, shown without a kernel as the experiment's static table.
``watcher``: the watcher that shows an experiment live when it starts, and as a one-line note
when the cell that ran it displays it (``ExperimentWatcher``). ``cell``: a ``%%fragola`` cell
that runs an experiment (``ExperimentCell``): prepare, run, finish, as a turn.
"""
