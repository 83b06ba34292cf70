"""The core: ``Fragola``, ``Agent`` and the run loop, and what they are made of.

``fragola`` and ``agent`` (the two public classes), ``runloop`` and ``driver`` (a turn: model
calls, tool calls, approvals, stops), ``events`` and ``listening`` (the events and their
listeners), ``tools`` and ``schemas``, ``state``, ``stores``, ``context``, ``history``, ``hooks``,
``instructions``, ``options``, ``usage`` and ``timing``, ``jsonmode``, ``forking`` and
``branchdiff``. Imports ``models`` and ``base``; no Jupyter module, no preset, no experiment
(but the ``agent.compare``/``agent.batch`` façades, which call into ``fragola_nb.experiments``).
"""
