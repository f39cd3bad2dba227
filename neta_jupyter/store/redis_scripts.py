"""The scripts every write of a run's events and status goes through, and their arguments.

A batch is appended by one script that checks the run's lease token and that the batch continues
the stream; a batch already applied (its reply was lost) is accepted as it is, so a retry never
duplicates; anything else is refused. A run's status written with its events (a terminal event)
rides in the same script, so both are durable or neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from .contract import EventRow
from .redis_conn import UserKeys

FENCE = """
local held = redis.call('GET', KEYS[2])
local function fenced()
  if held then return held ~= ARGV[1] end
  return ARGV[1] ~= '-'
end
local function settle(status, state, rid, keep)
  redis.call('HSET', KEYS[3], 'status', status, 'state', state)
  if status == 'running' then
    redis.call('ZADD', KEYS[4], 0, rid)
    redis.call('PERSIST', KEYS[1])
  else
    if status ~= 'suspended' and tonumber(keep) > 0 then redis.call('EXPIRE', KEYS[1], keep) end
    redis.call('ZREM', KEYS[4], rid)
    redis.call('HDEL', KEYS[3], 'owner')
    if held then redis.call('DEL', KEYS[2]) end
  end
end
"""
"""What the scripts share: whether the caller (token ``ARGV[1]``, ``-`` for none) may write a
run (``KEYS`` stream, lease, run, running), and a run's status set: its lease released when it
stops, its events kept ``keep`` seconds once it ended (0: forever), and for good while it runs."""

APPEND = (
    FENCE
    + """
local first, n = tonumber(ARGV[2]), tonumber(ARGV[3])
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local last = -1
if #top > 0 then last = tonumber(string.match(top[1][1], '%-(%d+)$')) - 1 end
-- This very batch was applied (its reply was lost): the stream ends with its last event. The
-- event itself is compared, not only its seq: another writer's events may end at the same seq.
local function replayed()
  if n == 0 or first + n - 1 ~= last then return false end
  local f = top[1][2]
  return f[2] == ARGV[9 + 2 * (n - 1)] and f[4] == ARGV[10 + 2 * (n - 1)]
end
if fenced() then
  -- a batch whose reply was lost after it released the lease is still a replay
  if not held and replayed() then return 0 end
  return redis.error_reply('FENCED the run is written by another server')
end
if replayed() then return 0 end
if n > 0 and first ~= last + 1 then
  return redis.error_reply('SEQ expected ' .. (last + 1))
end
for i = 0, n - 1 do
  redis.call('XADD', KEYS[1], '0-' .. (first + i + 1), 't', ARGV[9 + 2 * i], 'p', ARGV[10 + 2 * i])
end
if ARGV[4] ~= '' and redis.call('EXISTS', KEYS[3]) == 1 then
  settle(ARGV[4], ARGV[5], ARGV[6], ARGV[8])
end
if held and ARGV[7] ~= '' and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[2], ARGV[7])
end
return n
"""
)
"""``KEYS``: stream, lease, run, running; ``ARGV``: token, first seq, count, status ('' for
none), state, run id, lease time in ms ('' : not renewed), seconds an ended run's events are kept,
then type and payload of each event.
Replies the count written (0 for a replay). A status other than ``running`` releases the lease."""

UPDATE_RUN = (
    FENCE
    + """
if fenced() then return redis.error_reply('FENCED the run is written by another server') end
if redis.call('EXISTS', KEYS[3]) == 1 then settle(ARGV[2], ARGV[3], ARGV[4], ARGV[5]) end
return 1
"""
)
"""``KEYS`` as :data:`APPEND`'s; ``ARGV``: token, status, state, run id, seconds kept."""

NO_LEASE = "-"
"""The token of a writer holding no lease: refused while anyone holds the run's."""
CHUNK = 2048
"""Events per script call: a long batch is several calls, its run update on the last."""


@dataclass(slots=True)
class RunUpdate:
    """A run's status and state, durable with the events queued before it."""

    request_id: str
    status: str
    state: str


def append_args(
    token: str,
    rows: list[EventRow],
    update: RunUpdate | None,
    ttl_ms: int | None = None,
    keep: int = 0,
) -> list[str | int]:
    """The script's ``ARGV`` for ``rows`` (and the run update carried with them)."""
    args: list[str | int] = [token, rows[0][0] if rows else 0, len(rows)]
    args += [update.status, update.state, update.request_id] if update else ["", "", ""]
    args.append("" if ttl_ms is None or token == NO_LEASE else ttl_ms)
    args.append(keep)
    for _, kind, payload in rows:
        args += [kind, payload]
    return args


async def fenced_append(
    client: Any,
    user: UserKeys,
    stream: str,
    token: str,
    rows: list[EventRow],
    update: RunUpdate | None = None,
) -> int:
    """Append one batch by the fenced script on its own; how many events it wrote (0: a replay).

    Raises :class:`ResponseError` ``FENCED`` (another token holds the run's lease) or ``SEQ``
    (the batch does not continue the stream).
    """
    keys = script_keys(user, stream)
    return int(await client.eval(APPEND, len(keys), *keys, *append_args(token, rows, update)))


def script_keys(user: UserKeys, stream: str) -> list[str]:
    """The ``KEYS`` of :data:`APPEND` and :data:`UPDATE_RUN` for a run (or any stream)."""
    return [user.stream(stream), user.lease(stream), user.run(stream), user.running]


def is_transient(error: Exception) -> bool:
    """Whether ``error`` passes (Redis down, read-only, out of memory), unlike a refusal."""
    if not isinstance(error, ResponseError):
        return True
    text = str(error)
    return not (text.startswith("FENCED") or text.startswith("SEQ"))
