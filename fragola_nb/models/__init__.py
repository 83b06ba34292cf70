"""The models layer: everything that talks to a model server, and the servers we ship.

``client`` is the one home of the ``openai`` client (requests, streamed replies, errors);
``scripted`` is the scripted, OpenAI-compatible server tests and lessons run on; ``recording``
keeps real exchanges and serves them again (``Fragola.record``/``replay``); ``local`` starts
llama.cpp's server on loopback (``Fragola.local()``). Imports only ``fragola_nb.base``.
"""
