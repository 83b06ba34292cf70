"""``agent.compare``: one message sent to forks of an agent, one per variant, side by side.
``run`` runs the variants; ``comparison`` is the ``Comparison`` they fill."""
