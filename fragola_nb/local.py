"""``Fragola.local()``: a real model on this machine (llama.cpp's server; stub, in progress)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fragola import Fragola

__all__ = ["LocalServer", "start_local"]


class LocalServer:
    """A llama.cpp server process this Python started."""

    base_url: str
    model_file: Path

    def stop(self) -> None:
        raise NotImplementedError


def start_local(
    cls: type[Fragola], model_file: str | os.PathLike[str] | None, options: dict[str, Any]
) -> Fragola:
    raise NotImplementedError("Fragola.local() is being built")
