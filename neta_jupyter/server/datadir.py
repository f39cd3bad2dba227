"""One server per SQLite data directory, on a local disk.

SQLite's locking keeps one file consistent, but two servers on one database would each end the
other's runs at start-up and interleave their streams: the second server finds the directory's
lock held and refuses it, saying which process holds it. SQLite on a network filesystem (NFS,
SMB) may lose its locks or corrupt the database on a server crash: that gets a warning.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from ..store import StorageError

NETWORK_FILESYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "afs", "ceph", "9p")


class DataDirInUse(StorageError):
    """Another server keeps its runs in this SQLite database."""

    status = 503
    code = "STORAGE_IN_USE"


def lock_data_dir(db_path: Path) -> IO[str]:
    """Hold the lock of the database at ``db_path`` for as long as the file returned is open."""
    lock_path = db_path.with_name(db_path.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_path.open("a+", encoding="utf-8")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "another process"
        lock.close()
        raise DataDirInUse(
            f"another Jupyter server (pid {holder}) already keeps its runs in {db_path}; stop "
            "it, or give this server a data directory of its own (c.NetaApp.data_dir), or share "
            "runs between servers through Redis (c.NetaApp.store_url)",
            reason=f"{db_path} is in use by another server",
        ) from None
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def network_filesystem(path: Path, mounts: str | None = None) -> str | None:
    """The type of the network filesystem ``path`` is on (``nfs4``…), or None for a local one.

    ``mounts``: the text of ``/proc/mounts`` (read when not given; None where it is missing).
    """
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text(encoding="utf-8")
        except OSError:
            return None
    where = str(path.resolve())
    best, kind = "", ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, fields[2]
    return kind if kind in NETWORK_FILESYSTEMS else None
