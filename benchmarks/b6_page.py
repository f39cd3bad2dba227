"""What B6 installs in the JupyterLab page: the probe that times the widget, and the bare client.

``LONG_TASKS`` (an init script, so it sees the page from its first task; the browser test uses
it too) keeps every main-thread task over 50 ms (PerformanceObserver ``longtask``), as [start,
duration], and the long animation frames, which say what such a task did (``describe``).

``PROBE`` is that and, for the arrival-to-screen figure:

* arrivals: the widget's transport calls ``window.__netaEventsArrived(events)`` with each batch
  as it arrives (``ARRIVAL_PROBE`` in ``js/src/transport.ts``), the bare client does the same;
  a batch is kept as [first delta, last delta, time] (deltas are the words ``w0 w1 …``, so a
  delta is known by its number; a replayed delta is not counted again);
* screens: a MutationObserver on the watched element finds the last word in it after each
  change and posts a message to itself, timed after the frame that paints the change: a change
  made in an animation-frame callback (the bare client's, the widget's batched deltas) is painted
  by that frame, and the message posted then runs after it; a change made in any other task (the
  widget renders the first token of a block at once, in the task that received it) is painted by
  the next frame, and the message is posted from that frame's callbacks. So its time is when that
  text is on screen. Kept as [last delta shown, time].

``BARE`` is the baseline client: in the same page, it opens the server's WebSocket as the widget
does, starts the run over REST, subscribes, and appends the text of each ``TEXT_DELTA`` to one
text node of a plain div, once per animation frame.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

LONG_TASKS = r"""
(() => {
  const b6 = (window.__b6 = { longTasks: [], frames: [], arrivals: [], screens: [] });
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) b6.longTasks.push([e.startTime, e.duration]);
  }).observe({ type: "longtask", buffered: true });
  // Long animation frames say what a long task did: the scripts it ran (the widget's module is
  // a blob: URL) and where rendering (style, layout, paint) began.
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      b6.frames.push({
        start: e.startTime,
        duration: e.duration,
        render: e.renderStart,
        scripts: e.scripts.map((s) => [
          s.invoker, s.sourceURL, s.duration, s.sourceFunctionName, s.sourceCharPosition,
        ]),
      });
    }
  }).observe({ type: "long-animation-frame", buffered: true });
  b6.results = (since) => ({
    longTasks: b6.longTasks.filter(([start, duration]) => start + duration > since),
    frames: b6.frames.filter((f) => f.start + f.duration > since),
    arrivals: b6.arrivals,
    screens: b6.screens,
  });
})();
"""

PROBE = (
    LONG_TASKS
    + r"""
(() => {
  const b6 = Object.assign(window.__b6, {
    shown: -1, arrivedMax: -1, changedAt: 0, find: () => null,
  });
  const WORD = /w(\d+)\s*$/;
  const wordOf = (text) => {
    const m = WORD.exec(text.length > 64 ? text.slice(-64) : text);
    return m ? Number(m[1]) : -1;
  };
  /** The number of the last word in `root`'s text (-1: none), walking back from its end. */
  const lastWord = (root) => {
    let node = root ? root.lastChild : null;
    while (node) {
      if (node.nodeType === 1 && node.lastChild) {
        node = node.lastChild;
        continue;
      }
      if (node.nodeType === 3 && /\S/.test(node.data)) return wordOf(node.data);
      while (!node.previousSibling) {
        node = node.parentNode;
        if (!node || node === root) return -1;
      }
      node = node.previousSibling;
    }
    return -1;
  };
  b6.lastWord = lastWord;
  b6.cell = (index) => document.querySelectorAll(".jp-Notebook .jp-Cell")[index];
  b6.lastView = (cell) => {
    const views = cell.querySelectorAll("[data-testid=neta-run]");
    return views[views.length - 1] || null;
  };

  window.__netaEventsArrived = b6.arrived = (events) => {
    const now = performance.now();
    let first = -1;
    let last = -1;
    for (const e of events) {
      if (!e || e.eventType !== "TEXT_DELTA") continue;
      const i = wordOf(String(e.data && e.data.text));
      if (i <= b6.arrivedMax) continue;
      b6.arrivedMax = i;
      if (first < 0) first = i;
      last = i;
    }
    if (last >= 0) b6.arrivals.push([first, last, now]);
  };

  // Whether the page is in a frame's animation-frame callbacks: the first of them says so and
  // posts the message that says it is over, which runs once the frame has been painted.
  let inFrame = false;
  const frameOver = new MessageChannel();
  frameOver.port1.onmessage = () => (inFrame = false);
  const raf = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = (callback) =>
    raf((time) => {
      if (!inFrame) {
        inFrame = true;
        frameOver.port2.postMessage(0);
      }
      callback(time);
    });

  const channel = new MessageChannel();
  channel.port1.onmessage = (message) => b6.screens.push([message.data, performance.now()]);
  const observer = new MutationObserver(() => {
    b6.changedAt = performance.now();
    const shown = lastWord(b6.find());
    if (shown > b6.shown) {
      b6.shown = shown;
      if (inFrame) channel.port2.postMessage(shown);
      else raf(() => channel.port2.postMessage(shown));
    }
  });

  /** Start a measurement: watch `root` for changes, `find()` being the text to read. */
  b6.arm = (root, find) => {
    observer.disconnect();
    b6.arrivals = [];
    b6.screens = [];
    b6.shown = -1;
    b6.arrivedMax = -1;
    b6.changedAt = performance.now();
    b6.find = find;
    observer.observe(root, { subtree: true, childList: true, characterData: true });
    return performance.now();
  };
})();
"""
)

# Runs in the page: (cell index, scripted model spec) -> the time it started.
BARE = r"""
async ([index, model]) => {
  const b6 = window.__b6;
  const output = b6.cell(index).querySelector(".jp-OutputArea");
  const box = document.createElement("div");
  box.className = "b6-bare";
  box.style.font = "13px/1.5 var(--jp-ui-font-family, system-ui, sans-serif)";
  const text = document.createTextNode("");
  box.append(text);
  output.append(box);
  const started = b6.arm(box, () => box);

  const config = JSON.parse(document.getElementById("jupyter-config-data").textContent);
  const base = config.baseUrl.endsWith("/") ? config.baseUrl : `${config.baseUrl}/`;
  const token = config.token ? `?token=${encodeURIComponent(config.token)}` : "";
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const socket = new WebSocket(`${scheme}//${location.host}${base}neta/ws${token}`);
  await new Promise((opened, failed) => {
    socket.onopen = opened;
    socket.onerror = failed;
  });
  const headers = { "Content-Type": "application/json" };
  const xsrf = /(?:^|;\s*)_xsrf=([^;]*)/.exec(document.cookie);
  if (xsrf) headers["X-XSRFToken"] = decodeURIComponent(xsrf[1]);
  if (config.token) headers["Authorization"] = `token ${config.token}`;
  const response = await fetch(`${base}neta/api/agent/run/async`, {
    method: "POST",
    credentials: "same-origin",
    headers,
    body: JSON.stringify({ content: "go", model }),
  });
  const { requestId } = await response.json();
  let pending = "";
  let frame = 0;
  socket.onmessage = (message) => {
    const events = JSON.parse(message.data);
    if (!Array.isArray(events)) return;
    b6.arrived(events);
    for (const e of events) {
      if (e.eventType === "TEXT_DELTA") pending += e.data.text;
      else if (e.eventType === "MESSAGE_COMPLETED") socket.close();
    }
    if (!frame) {
      frame = requestAnimationFrame(() => {
        frame = 0;
        text.appendData(pending);
        pending = "";
      });
    }
  };
  socket.send(JSON.stringify({ type: "subscribe", requestId, id: "b6" }));
  return started;
}
"""


def describe(start: float, duration: float, origin: float, frames: list[dict[str, Any]]) -> str:
    """A long task in a few words, for the log: when (ms after ``origin``), how long, and from the
    long animation frame it belongs to, the scripts that ran (``widget`` is the widget's module)
    and how long rendering (style, layout, paint) took after them."""
    words = [f"+{start - origin:.0f}: {duration:.0f} ms"]
    for frame in frames:
        if frame["start"] <= start + 1 and start < frame["start"] + frame["duration"]:
            scripts: dict[str, float] = {}
            for invoker, url, ms, function, position in frame["scripts"]:
                where = "widget" if str(url).startswith("blob:") else Path(str(url)).name[:16]
                key = f"{where or '?'} {str(invoker)[:40]} ({function or '?'}@{position})"
                scripts[key] = scripts.get(key, 0.0) + ms
            words += [f"{key} {ms:.0f}" for key, ms in scripts.items() if ms >= 5]
            if frame["render"]:
                words.append(f"render {frame['start'] + frame['duration'] - frame['render']:.0f}")
            break
    return "[" + ", ".join(words) + "]"
