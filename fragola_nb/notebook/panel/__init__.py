"""The agent's panel: one anywidget per agent (``view.AgentPanel``, ``panel.js``/``panel.css``).

``view`` binds the agent to the widget; ``message_rows`` makes each message's row, ``view_data`` the
strip's and the head's facts, ``outbox`` paces what the kernel sends, ``actions`` runs the
buttons (Step, Stop, Approve, Fork...), ``message_controls`` forks from a message, ``timeline`` and
``timeline_feed`` draw the waterfall of a turn.
"""
