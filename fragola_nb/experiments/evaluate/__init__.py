"""``agent.evaluate``: cases × variants × repeats, graded. ``run`` runs them, ``evaluation`` is
the ``Evaluation`` they fill (rows in ``evalrow``, its file in ``resume``, its header in
``header``); ``summary``, ``intervals``, ``verdicts``, ``versus`` and ``pairjudge`` give the
figures and the paired verdicts, ``labels`` and ``human`` the human labels, ``diff`` and
``setups`` what changed between two runs, ``htmlview`` and ``trailhtml`` the static HTML."""
