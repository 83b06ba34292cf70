"""Writing a file so that a crash leaves the old one or the new one, whole.

The path given is the directory entry written: when it is a symbolic link, the link itself is
replaced by the new file and its target is never opened (a link planted where a session or an
export is saved cannot redirect the write). Only the directories on the way are followed.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from fragola_nb.base.textfile import utf8

__all__ = ["atomic_write", "entry_path"]


def entry_path(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute without following a link in its last part."""
    return Path(os.path.abspath(path))


def atomic_write(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Write ``text`` to ``path``: a temporary file beside it, flushed, fsynced, renamed over it.

    ``text`` is written as UTF-8 as it is (no newline translation), a lone surrogate as its
    escape (``fragola_nb.base.textfile``): any text a model sent can be saved.

    A new file gets ``mode`` (by default readable by its owner only: conversations are
    private); an existing regular file keeps its permissions. A symbolic link at ``path`` is
    replaced (the rename never follows it), and the link's target is left as it was.
    """
    try:
        existing = os.lstat(path)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISREG(existing.st_mode):
        mode = existing.st_mode & 0o777
    descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as file:
            os.chmod(name, mode)
            file.write(utf8(text))
            file.flush()
            os.fsync(file.fileno())
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    with contextlib.suppress(OSError, AttributeError):  # make the rename itself durable
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
