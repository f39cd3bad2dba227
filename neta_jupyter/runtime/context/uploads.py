"""A user's upload quota: bytes of files a user keeps uploaded, and for how long.

This and the quota of runs going at once (:mod:`..scheduling.quotas`) answer ``429`` with a code
(``RUN_QUOTA_EXCEEDED``, ``ATTACHMENT_QUOTA_EXCEEDED``) and a message that says the limit and
what frees room. A user's uploads (and imported URLs) live in a folder of their own,
``uploads/<user>/``: what they hold is what counts, and files older than the retention are
deleted from it before each new one is stored, and by the periodic sweep.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from ..config import UploadQuota
from ..errors import RunApiError


class QuotaExceeded(RunApiError):
    """A user's quota is used up; a later request may succeed."""

    status = 429
    code = "QUOTA_EXCEEDED"


def user_folder(uploads: Path, principal: str) -> Path:
    """The folder of ``principal``'s uploads (a digest: a user name may hold any character)."""
    return uploads / hashlib.sha256(principal.encode()).hexdigest()[:24]


_locks: defaultdict[tuple[int, Path], asyncio.Lock] = defaultdict(asyncio.Lock)
"""One per user folder and event loop (a lock belongs to the loop it first waited in)."""


@asynccontextmanager
async def room_for(folder: Path, size: int, quota: UploadQuota) -> AsyncIterator[None]:
    """Hold the user's folder while a file of ``size`` bytes is stored in it (or refuse it)."""
    async with _locks[(id(asyncio.get_running_loop()), folder)]:
        used = await asyncio.to_thread(_prune_and_measure, folder, quota.retention)
        if quota.bytes and used + size > quota.bytes:
            raise QuotaExceeded(
                f"storing this file ({size:,} bytes) would take your uploads to "
                f"{used + size:,} bytes, over your quota of {quota.bytes:,} bytes "
                "(c.NetaApp.max_upload_bytes_per_user); uploads are deleted "
                f"{_days(quota.retention)} after they were made",
                code="ATTACHMENT_QUOTA_EXCEEDED",
            )
        yield


def sweep(uploads: Path, retention: float) -> int:
    """Delete every user's uploads older than ``retention``; how many were deleted."""
    if retention <= 0 or not uploads.is_dir():
        return 0
    return sum(_prune(folder, retention) for folder in uploads.iterdir() if folder.is_dir())


def _prune_and_measure(folder: Path, retention: float) -> int:
    if retention > 0:
        _prune(folder, retention)
    if not folder.is_dir():
        return 0
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _prune(folder: Path, retention: float) -> int:
    """One upload is one folder (``<attachmentId>/<name>``): it goes whole when it is old."""
    cutoff, deleted = time.time() - retention, 0
    for upload in folder.iterdir() if folder.is_dir() else ():
        try:
            if upload.stat().st_mtime < cutoff:
                shutil.rmtree(upload) if upload.is_dir() else upload.unlink()
                deleted += 1
        except OSError:
            continue  # deleted meanwhile, or not ours to delete: the next sweep sees it
    return deleted


def _days(seconds: float) -> str:
    if seconds <= 0:
        return "never"
    days = seconds / 86_400
    return f"{days:g} days" if days >= 1 else f"{seconds:g} s"
