"""``Fragola.record`` and ``Fragola.replay``: real exchanges kept as JSON Lines, served again
offline over real HTTP. (Being built.)"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..fragola import Fragola

__all__ = ["start_recording", "start_replay"]


def start_recording(
    cls: type[Fragola], path: str | os.PathLike[str], options: dict[str, Any]
) -> Fragola:
    raise NotImplementedError("Fragola.record is being built")


def start_replay(
    cls: type[Fragola], path: str | os.PathLike[str], options: dict[str, Any]
) -> Fragola:
    raise NotImplementedError("Fragola.replay is being built")
