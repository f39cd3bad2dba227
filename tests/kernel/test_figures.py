"""Figures the ``python`` tool captures in a notebook's kernel while the run's view talks to it.

JupyterLab (4.4 and later) sends widget messages over kernel subshells, which ipykernel (7 and
later) handles on threads of their own, while the tool's code runs on the kernel's main thread.
The view saves its snapshot as the run goes on; handling that message must not draw the figures
the code is drawing (matplotlib is not thread-safe: a figure drawn by two threads at once comes
out half drawn).
"""

from __future__ import annotations

import asyncio
import base64
import io
from typing import Any

import matplotlib.image
import numpy as np
import pytest

from neta_jupyter.providers import ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient, types
from tests.kernel.test_embedded import KernelSession
from tests.kernel.test_magics import LAST, STARTED_ID, server_kernel
from tests.tools.test_kernel_tools import approve_pending, call, script

pytestmark = pytest.mark.timeout(120)

# The race, made certain: the PNG encoder of the main thread starts only once the view's message
# has been handled (and another thread, if it is going to, has begun drawing the figure), and a
# figure drawn by another thread pauses halfway until that encoding is done. Every thread that
# draws a figure is recorded.
GATE = """
import threading
import matplotlib.artist
import matplotlib.image

draws, heard = [], []
view_spoke, other_drew, encoded = threading.Event(), threading.Event(), threading.Event()
view_live = threading.Event()
gated = {"on": True}

def _heard(change):
    if threading.current_thread() is not threading.main_thread():
        view_live.set()
        view_spoke.set()

_last.widget.observe(_heard, names="snapshot")

class Gate(matplotlib.artist.Artist):
    zorder = 2  # above the bars and ticks, below the spines and title

    def __init__(self):
        super().__init__()
        self.set_in_layout(False)

    def draw(self, renderer):
        draws.append(threading.current_thread().name)
        if threading.current_thread() is not threading.main_thread():
            other_drew.set()
            encoded.wait(5)

_imsave = matplotlib.image.imsave

def _slow_imsave(*args, **kwargs):
    if not gated["on"] or threading.current_thread() is not threading.main_thread():
        return _imsave(*args, **kwargs)
    view_spoke.clear()
    other_drew.clear()
    encoded.clear()
    heard.append(view_spoke.wait(60))
    other_drew.wait(2)
    try:
        return _imsave(*args, **kwargs)
    finally:
        encoded.set()

matplotlib.image.imsave = _slow_imsave
"""

PLOT = """
import matplotlib.pyplot as plt
import numpy as np
values = np.random.default_rng(7).normal(50, 10, 2000)
fig, ax = plt.subplots()
ax.bar(range(80), np.histogram(values, bins=80)[0])
ax.set_title("shown")
_ = ax.add_artist(Gate())
plt.show()
fig, ax = plt.subplots()
ax.plot(np.sort(values))
ax.set_title("left open")
_ = ax.add_artist(Gate())
"""


async def subshell(k: KernelSession) -> str:
    """A new subshell of the kernel, as JupyterLab creates one for widget messages."""
    k.kc.control_channel.send(k.kc.session.msg("create_subshell_request", {}))
    reply = await k.kc.get_control_msg(timeout=30)
    while reply["msg_type"] != "create_subshell_reply":
        reply = await k.kc.get_control_msg(timeout=30)
    subshell_id: str = reply["content"]["subshell_id"]
    return subshell_id


async def keep_saving_snapshots(k: KernelSession, comm_id: str, subshell_id: str) -> None:
    """What the view does while a run goes on: it saves the run's snapshot in the widget."""
    for seq in range(1_000_000):
        content = {
            "comm_id": comm_id,
            "data": {
                "method": "update",
                "state": {"snapshot": {"status": "running", "finalText": "", "lastSeq": seq}},
                "buffer_paths": [],
            },
        }
        msg = k.kc.session.msg("comm_msg", content)
        msg["header"]["subshell_id"] = subshell_id
        k.kc.shell_channel.send(msg)
        await asyncio.sleep(0.05)


async def until_heard_on_its_own_thread(k: KernelSession) -> None:
    """Wait until the view's messages are handled on the subshell's thread.

    ipykernel hands a comm's incoming messages to the subshell of the request during which the
    kernel last sent on that comm: the main thread after the ``%neta`` cell opened the widget,
    the view's subshell once the widget has echoed one of the view's updates. Short cells leave
    the main thread free to handle the first updates; one long wait would hold them up for good.
    """
    for _ in range(600):  # a minute at most
        if await k.json("import json\nprint(json.dumps(view_live.is_set()))"):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the view's messages never reached the widget on a thread of their own")


def pixels(png: bytes) -> Any:
    return matplotlib.image.imread(io.BytesIO(png), format="png")


async def test_figures_come_back_whole_while_the_view_saves_its_snapshot(
    jp_serverapp: Any, api: ApiClient, runtime: Runtime
) -> None:
    script(runtime, call("python", code=PLOT), ScriptedTurn(text="Here are the plots."))
    async with server_kernel(jp_serverapp) as (_kernel_id, k):
        await k.run("%load_ext neta_jupyter")
        own = await k.run("%neta --model scripted plot the values")
        opened = next(
            m
            for m in own
            if m["msg_type"] == "comm_open"
            and m["content"]["data"]["state"].get("prompt") == "plot the values"
        )
        comm_id = opened["content"]["comm_id"]
        rid = await k.json(STARTED_ID)
        first = await api.segment(rid)
        assert types(first)[-1] == "MESSAGE_SUSPENDED"
        await k.run(LAST + GATE)

        subshell_id = await subshell(k)
        view = asyncio.ensure_future(keep_saving_snapshots(k, comm_id, subshell_id))
        try:
            await until_heard_on_its_own_thread(k)
            await approve_pending(api, rid, first)
            second = await api.segment(rid, first[-1]["seq"])
        finally:
            view.cancel()
        assert types(second)[-1] == "MESSAGE_COMPLETED"

        done = next(e["data"] for e in second if e["eventType"] == "TOOL_COMPLETED")
        assert done["output"] == "[image: figure-1.png]\n[image: figure-2.png]\n"
        assert len(done["images"]) == 2, "one image per figure"
        attached = [e["data"] for e in second if e["eventType"] == "ATTACHMENT_CHANGED"]
        assert [a["virtualPath"] for a in attached] == done["images"]

        seen = await k.json("import json\nprint(json.dumps([draws, heard]))")
        assert seen[1] == [True, True], "the view spoke while each figure was being drawn"
        assert set(seen[0]) == {"MainThread"}, "only the code's own thread drew its figures"

        # The same figures drawn again in a cell with nobody else talking to the kernel.
        again = await k.run("gated['on'] = False\n" + PLOT)
        expected = [
            base64.b64decode(m["content"]["data"]["image/png"])
            for m in again
            if m["msg_type"] == "display_data" and "image/png" in m["content"]["data"]
        ]
        assert len(expected) == 2
        for path, reference in zip(done["images"], expected, strict=True):
            download = await api.http.get(
                "neta/api/agent/attachment/download", params={"virtualPath": path}
            )
            assert download.status_code == 200
            got, want = pixels(download.content), pixels(reference)
            assert got.shape == want.shape
            assert np.array_equal(got, want), f"{path} is not the whole figure"
