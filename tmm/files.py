"""Files a program writes, written atomically and durably: a temporary file
next to the target, flushed and fsynced, renamed over the target, and the
folder fsynced, so that a reader (or a crash, or a SIGKILL at any instant)
sees the old file or the new one, never half of one. A killed writer leaves
at most a ``.<name>.tmp*`` file beside the target, which the next write does
not need removed. Every writer takes ``mode`` (:func:`atomic_write_bytes`).
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Union

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_json", "atomic_savefig", "fsync_dir"]

Mode = Union[None, int, str]


def fsync_dir(path) -> None:
    """Flushes a folder's entries (a rename or a new file in it) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_mode(mode: Mode) -> None:
    if mode is None or mode == "keep":
        return
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
        raise ValueError(f"atomic write: mode must be None, 'keep' or an int permission (e.g. 0o644), got {mode!r}")


@contextlib.contextmanager
def _replacing(path, mode: Mode = None):
    """Yields a binary file object; on a clean exit its content replaces
    ``path`` (see the module docstring); on an exception the target is left
    as it was and the temporary file removed."""
    _check_mode(mode)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL on a random name: unique across threads and processes; 0o666 so
    # the kernel applies the umask as for any new file.
    while True:
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}-{secrets.token_hex(4)}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            if mode == "keep":
                try:
                    os.fchmod(f.fileno(), os.stat(path).st_mode & 0o7777)
                except FileNotFoundError:
                    pass
            elif mode is not None:
                os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path, data: bytes, mode: Mode = None) -> None:
    """``data`` as the file ``path``, atomically. ``mode``, the new file's
    permissions: None gives what a plain ``open()`` gives a new file (0o666
    minus the umask), not the 0o600 of a ``tempfile.mkstemp`` file; ``"keep"``
    keeps those of the file being replaced (the default's when there is none);
    an int sets them exactly. The other writers take the same ``mode``."""
    with _replacing(path, mode) as f:
        f.write(data)


def atomic_write_text(path, text: str, mode: Mode = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def atomic_write_json(path, obj, indent=2, mode: Mode = None) -> None:
    """``obj`` as JSON (``default=str`` for what JSON lacks: paths, numpy scalars), one trailing newline."""
    atomic_write_text(path, json.dumps(obj, indent=indent, default=str) + "\n", mode)


def atomic_savefig(fig, path, dpi=110, mode: Mode = None) -> None:
    """A matplotlib figure, in the format its suffix names (PNG when it has none)."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    with _replacing(path, mode) as f:
        fig.savefig(f, format=fmt, dpi=dpi)
