"""Execution only: what one ``user_message``/``step``/``json`` call does once it runs.

``driver`` runs a call as a task, stops it and settles the agent; ``loop`` is the run loop
(model calls, tool calls, approvals). Both work on an agent's ``Conversation`` (its state)
and ``RunDeps`` (what the run depends on: ``fragola_nb.core.conversation``), never on
``Agent`` itself: nothing here is a public name, and nothing outside ``fragola_nb.core``
should import it.
"""
