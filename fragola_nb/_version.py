"""The version of fragola_nb, stated here only.

pyproject.toml reads it (``[tool.setuptools.dynamic]``) for the wheel's and the sdist's
metadata, and ``fragola_nb.__version__`` imports it, so the version a recording file or a
trace names is the one pip installed, in an editable install too (where the installed
metadata would keep the version of the last ``pip install``).
"""

from __future__ import annotations

__version__ = "0.1.0"
