"""The bottom layer: what every other layer may use, importing no other part of fragola_nb.

``errors`` (the exception classes), ``redact`` (the one rule that keeps credentials out of
every text, file and span), ``render`` (safe text and Markdown for views), ``checks`` (messages
and content as a user, a listener or a session hands them over), ``sync`` (running async code
from a notebook or a script), ``interrupt_ticker`` (a Jupyter interrupt gets through a
waiting call) and ``textfile`` (the one rule for text written to a file).
"""
