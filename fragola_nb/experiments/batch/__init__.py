"""``agent.batch``: many inputs, each sent to its own fork of an agent. ``run`` runs them (the
``Batch`` object, which the Ray runner drives too), ``result`` is the ``BatchResult`` and its
rows, ``resume`` the file that lets a stopped batch go on."""
