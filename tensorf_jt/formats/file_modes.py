"""Files written through a temporary file and a rename (``write_atomically``), and their permissions.

``tempfile.mkstemp`` creates its file with mode 0600 whatever the umask, so a checkpoint
written that way and renamed into place would be readable by its owner only. Such files are
given what a plain ``open(path, 'w')`` would give instead: the mode of the file being
replaced, or for a new file ``0o666 & ~umask`` (0644 under the usual umask 022, 0664 under
002, 0600 under 077). Files written with ``open`` (renders, logs, meshes) get that already.
"""
from __future__ import annotations

import os
import stat
import tempfile
import threading

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask, read without changing it where the system allows.

    Linux (4.7 and later) reports it in ``/proc/self/status``. Elsewhere the only way is to
    set a umask and put the old one back; until it is back, a file another thread creates
    gets the temporary one. 0o077 is used, so such a file would be too private rather than
    readable by all, and the lock keeps two callers here from reading each other's value.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        umask = os.umask(0o077)
        os.umask(umask)
    return umask


def replacement_mode(path: str) -> int:
    """Permission bits for a file about to be written to ``path`` by renaming a temporary file:
    those of the file already there (as ``open`` keeps them), else ``0o666 & ~umask``."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode) & 0o777
    except OSError:
        return 0o666 & ~current_umask()


def share_like_open(temporary: str, path: str) -> None:
    """Give the temporary file that will be renamed to ``path`` the mode ``open`` would give ``path``.

    A file system without Unix permissions (FAT, some network shares) refuses or ignores the
    change; the file is written all the same.
    """
    try:
        os.chmod(temporary, replacement_mode(path))
    except OSError:
        pass


def write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename, so the
    file is complete or absent (never truncated), with the mode ``open`` would give it."""
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        share_like_open(temporary, path)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
