"""Presets: what a user puts on an agent, built on the core's public surface.

``guardrails`` (checks on what goes in and out), ``orchestration`` (agents that hand work to
each other), ``mcptools`` (tools served by an MCP server: the ``mcp`` extra), ``tracing``
(OpenTelemetry spans: the ``otel`` extra) and ``hooks`` (presets as hooks: ``preset`` and
``mcp_hook``, public in ``fragola_nb``). Independent of ``fragola_nb.sessions``: neither
imports the other.
"""
