"""The core: ``Fragola``, ``Agent`` and the run loop, and what they are made of.

``fragola`` and ``agent`` (the two public classes), ``conversation`` (an agent's state and
its run's dependencies, the two objects a turn works on), ``run`` (execution only: the run
loop and the driver of a turn), ``events`` and ``listening`` (the events and their
listeners), ``tools`` and ``schemas``, ``state``, ``stores``, ``context``, ``history``,
``hooks``, ``instructions``, ``options``, ``usage`` and ``timing``, ``jsonmode``, ``forking``
and ``branchdiff``. Imports ``models`` and ``base``; no Jupyter module, no preset, no
experiment (but the ``agent.compare``/``agent.batch``/``agent.evaluate`` façades, which call
into ``fragola_nb.experiments`` through ``fragola_nb.core.facade``).
"""
