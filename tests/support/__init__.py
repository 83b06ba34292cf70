"""The modules the tests share (tests/ is on ``sys.path``: ``from support.helpers import ...``).

Not tests: builders, scripted worlds, a kernel harness, schema checks, loopback APIs.
"""
