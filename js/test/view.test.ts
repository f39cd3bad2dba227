import { beforeEach, describe, expect, it, vi } from "vitest";
import type { RunAction } from "../src/actions";
import { JOIN_LIMIT, PIECE, renderBlock } from "../src/markdown";
import { reduceAll } from "../src/reducer";
import { initialState, type RunState } from "../src/state";
import { ARM_DELAY_MS, type PromptGuard } from "../src/view/guard";
import { TOAST_MS } from "../src/view/panels";
import { CHARS_PER_SKIPPED_FRAME, RunView } from "../src/view/run-view";
import { FakeClock } from "./clock";
import { envelope, fixture, type Envelope } from "./helpers";

let container: HTMLElement;
let clock: FakeClock;
let onAction: ReturnType<typeof vi.fn<(action: RunAction) => Promise<void>>>;
let view: RunView;

/** The browser's visibility and hit checks, as a test sets them: in view, every click deliberate. */
const guard = {
  visible: true,
  deliberate: true,
  watchers: new Set<(visible: boolean) => void>(),
  setVisible(visible: boolean): void {
    this.visible = visible;
    for (const watcher of this.watchers) watcher(visible);
  },
};
const testGuard: PromptGuard = {
  observe(_element, onChange) {
    guard.watchers.add(onChange);
    onChange(guard.visible);
    return () => guard.watchers.delete(onChange);
  },
  deliberate: () => guard.deliberate,
};

/** A new view in an empty page (before each test, and again where a test needs a fresh one). */
function setup(): void {
  document.body.replaceChildren();
  container = document.createElement("div");
  document.body.append(container);
  clock = new FakeClock();
  onAction = vi.fn<(action: RunAction) => Promise<void>>(async () => {});
  view = new RunView(container, {
    prompt: "which columns have missing values?",
    onAction,
    resolveUrl: (path) => (path.startsWith("data:") ? path : `/base/download?virtualPath=${encodeURIComponent(path)}`),
    clock,
    guard: testGuard,
  });
  guard.visible = true;
  guard.deliberate = true;
  guard.watchers.clear();
}

beforeEach(setup);

function byTestId(id: string, root: ParentNode = container): HTMLElement {
  const found = root.querySelector<HTMLElement>(`[data-testid="${id}"]`);
  if (!found) throw new Error(`no ${id}`);
  return found;
}

function all(id: string, root: ParentNode = container): HTMLElement[] {
  return [...root.querySelectorAll<HTMLElement>(`[data-testid="${id}"]`)];
}

function show(state: RunState): RunState {
  view.update(state);
  clock.runFrames();
  return state;
}

function until(events: Envelope[], eventType: string): Envelope[] {
  return events.slice(0, events.findIndex((e) => e.eventType === eventType) + 1);
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("rendering a whole run", () => {
  beforeEach(() => {
    show(reduceAll(fixture("basic_run")));
  });

  it("keeps the root's status and last seq current", () => {
    const root = byTestId("neta-run");
    expect(root.dataset["status"]).toBe("completed");
    expect(root.dataset["lastSeq"]).toBe("36");
    expect(root.dataset["requestId"]).toBe("r_basic");
  });

  it("shows reasoning folded apart from the answer, as markdown", () => {
    const reasoning = byTestId("neta-reasoning") as HTMLDetailsElement;
    expect(reasoning.tagName).toBe("DETAILS");
    expect(reasoning.open).toBe(false);
    expect(reasoning.textContent).toContain("I should inspect df first.");
    const answer = byTestId("neta-answer");
    expect(answer.querySelector("strong")?.textContent).toBe("b");
    expect(answer.querySelector("code.language-python .hljs-string")).not.toBeNull();
    expect(answer.textContent).not.toContain("inspect df");
  });

  it("renders a tool card with arguments, output, duration and image", () => {
    const card = byTestId("neta-tool-card");
    expect(card.dataset).toMatchObject({ toolName: "python", status: "completed", toolCallId: "call_1" });
    expect(card.querySelector(".neta-tool-args code")?.textContent).toBe("df.isna().sum()");
    expect(byTestId("neta-tool-output", card).tagName).toBe("PRE");
    expect(byTestId("neta-tool-output", card).textContent).toContain("b    12");
    expect(card.querySelector(".neta-tool-duration")?.textContent).toBe("412 ms");
    expect(card.querySelector("img")?.getAttribute("src")).toBe("/base/download?virtualPath=%2Fsessions%2Fs_1%2Fplot_1.png");
  });

  it("lists attachments with download links, usage with the cache hit rate, and the finish reason", () => {
    const link = byTestId("neta-attachment").querySelector("a");
    expect(link?.textContent).toBe("missing.csv");
    expect(link?.getAttribute("href")).toBe("/base/download?virtualPath=%2Fsessions%2Fs_1%2Fmissing.csv");
    expect(byTestId("neta-usage").textContent).toBe("2,310 tokens · 2,000 in · 310 out · 40 reasoning · cache hit 25%");
    expect(byTestId("neta-finish").textContent).toBe("Finished");
    expect(byTestId("neta-finish").hidden).toBe(false);
    expect(byTestId("neta-stop").hidden).toBe(true);
    expect(byTestId("neta-retry").hidden).toBe(true);
    expect(byTestId("neta-error").hidden).toBe(true);
    expect(byTestId("neta-input").closest("[hidden]")).not.toBeNull();
  });
});

describe("a figure a tool made", () => {
  it("is shown once, in its tool card; the attachment list only names it", () => {
    const events = fixture("basic_run");
    const plot = "/sessions/s_1/plot_1.png";
    const attachment = envelope("ATTACHMENT_CHANGED", 37, {
      type: "attachment",
      attachmentId: "att_plot",
      fileName: "plot_1.png",
      contentType: "image/png",
      fileSize: 13_000,
      virtualPath: plot,
    }, "r_basic");
    const other = envelope("ATTACHMENT_CHANGED", 38, {
      type: "attachment",
      attachmentId: "att_other",
      fileName: "other.png",
      contentType: "image/png",
      virtualPath: "/sessions/s_1/other.png",
    }, "r_basic");
    show(reduceAll([...events, attachment, other]));
    const url = `/base/download?virtualPath=${encodeURIComponent(plot)}`;
    expect([...container.querySelectorAll(`img[src="${url}"]`)].map((img) => img.className)).toEqual(["neta-tool-image"]);
    const items = all("neta-attachment").map((item) => item.textContent);
    expect(items.some((text) => text?.includes("plot_1.png"))).toBe(true);
    // An image no tool card shows keeps its preview in the list.
    expect(container.querySelectorAll("img.neta-attachment-image")).toHaveLength(1);
  });
});

describe("files the agent sends", () => {
  it("are listed as sent with a download link; sending one again marks it updated", () => {
    const sent = (seq: number, changeType: string, fileSize: number) =>
      envelope("ATTACHMENT_SENT", seq, {
        type: "attachment",
        attachmentId: "att_report",
        sessionId: "s_1",
        fileName: "report.csv",
        fileExtension: "csv",
        contentType: "text/csv",
        fileSize,
        virtualPath: "s_1/r_1/report.csv",
        source: "AGENT_GENERATED",
        changeType,
      });
    show(reduceAll([sent(0, "CREATED", 10)]));
    const [item] = all("neta-attachment");
    const link = item?.querySelector("a");
    expect(link?.textContent).toBe("report.csv");
    expect(link?.getAttribute("href")).toBe("/base/download?virtualPath=s_1%2Fr_1%2Freport.csv");
    expect(link?.getAttribute("download")).toBe("report.csv");
    expect([...(item?.querySelectorAll(".neta-badge") ?? [])].map((b) => b.textContent)).toEqual(["sent"]);
    show(reduceAll([sent(0, "CREATED", 10), sent(1, "UPDATED", 2048)]));
    const [again, ...more] = all("neta-attachment");
    expect(more).toHaveLength(0);
    expect([...(again?.querySelectorAll(".neta-badge") ?? [])].map((b) => b.textContent)).toEqual(["updated", "sent"]);
    expect(again?.textContent).toContain("2.0 KB");
  });
});

describe("batching", () => {
  it("renders once per animation frame, never per event", () => {
    const events = fixture("basic_run");
    let state = initialState();
    for (const event of events) {
      state = reduceAll([event], state);
      view.update(state);
    }
    expect(clock.frameRequests).toBe(1);
    expect(byTestId("neta-answer").textContent).toBe("");
    clock.runFrames();
    expect(byTestId("neta-answer").textContent).toContain("I saved the counts");
    expect(byTestId("neta-run").dataset["lastSeq"]).toBe("36");
  });

  it("touches the DOM only where something changed: a delta changes no attribute", () => {
    const events = fixture("basic_run");
    const delta = events.findIndex((e) => e.eventType === "TEXT_DELTA");
    let state = reduceAll(events.slice(0, delta + 1));
    view.update(state);
    clock.runFrames();
    const changed: string[] = [];
    const observer = new MutationObserver((records) => changed.push(...records.map((r) => String(r.attributeName))));
    observer.observe(container, { subtree: true, attributes: true });
    state = reduceAll([events[delta + 1]!], state);
    expect(events[delta + 1]?.eventType).toBe("TEXT_DELTA");
    view.update(state);
    view.setNotice(null);
    clock.runFrames();
    expect(observer.takeRecords().map((r) => String(r.attributeName))).toEqual(["data-last-seq"]);
    expect(changed).toEqual([]);
  });

  it("streams arguments into a card while they are generated", () => {
    const events = fixture("basic_run");
    const generating = events.filter((e) => e.eventType === "TOOL_CALL_GENERATING");
    show(reduceAll(events.slice(0, events.indexOf(generating[3]!) + 1)));
    const card = byTestId("neta-tool-card");
    expect(card.dataset["status"]).toBe("generating");
    expect(card.querySelector(".neta-tool-args code")?.textContent).toBe('{"code": "df.isna().s');
    expect(byTestId("neta-stop").hidden).toBe(false);
  });
});

describe("permission prompt", () => {
  const events = fixture("permission_resume");

  beforeEach(() => {
    show(reduceAll(until(events, "MESSAGE_SUSPENDED")));
    clock.advance(ARM_DELAY_MS);
  });

  it("shows the tool, its arguments and the rule that matched", () => {
    const prompt = byTestId("neta-permission");
    expect(prompt.hidden).toBe(false);
    expect(prompt.textContent).toContain("python");
    expect(prompt.textContent).toContain("os.remove('data.csv')");
    expect(prompt.textContent).toContain("Running code in your kernel needs your approval");
    expect(prompt.textContent).toContain("python(*)");
    expect(byTestId("neta-run").dataset["status"]).toBe("suspended");
    expect(byTestId("neta-tool-card").querySelector(".neta-badge")?.textContent).toBe("needs approval");
  });

  it.each([
    ["neta-approve", true, false],
    ["neta-always", true, true],
    ["neta-deny", false, false],
  ])("%s sends the decision and disables the buttons", async (testid, approved, always) => {
    byTestId(testid).click();
    expect(onAction).toHaveBeenCalledWith({ action: "resume", requestId: "r_perm", askId: "ask_1", approved, always });
    await settle();
    expect((byTestId("neta-approve") as HTMLButtonElement).disabled).toBe(true);
  });

  it("shows why a decision was refused and lets the user try again", async () => {
    onAction.mockRejectedValueOnce(new Error("Run is not suspended"));
    byTestId("neta-approve").click();
    await settle();
    expect(byTestId("neta-error").hidden).toBe(false);
    expect(byTestId("neta-error").textContent).toContain("Run is not suspended");
    expect((byTestId("neta-approve") as HTMLButtonElement).disabled).toBe(false);
  });

  it("goes away when the run resumes", () => {
    show(reduceAll(events));
    expect(byTestId("neta-permission").hidden).toBe(true);
    expect(byTestId("neta-tool-card").querySelector(".neta-badge")?.textContent).toBe("done");
    expect(byTestId("neta-answer").textContent).toContain("Removed data.csv.");
  });
});

describe("clarify box", () => {
  beforeEach(() => {
    const events = fixture("catalogue_rest");
    show(reduceAll(until(events, "MESSAGE_SUSPENDED")));
    clock.advance(ARM_DELAY_MS);
  });

  it("answers with an option button", () => {
    const box = byTestId("neta-clarify");
    expect(box.textContent).toContain("Which column should I plot?");
    all("neta-clarify-option", box)[1]!.click();
    expect(onAction).toHaveBeenCalledWith({ action: "resume", requestId: "r_misc", askId: "cl_1", answer: "b" });
  });

  it("answers with free text", () => {
    (byTestId("neta-clarify-input") as HTMLTextAreaElement).value = "column c, please";
    byTestId("neta-clarify-send").click();
    expect(onAction).toHaveBeenCalledWith({ action: "resume", requestId: "r_misc", askId: "cl_1", answer: "column c, please" });
  });
});

describe("controls", () => {
  it("Stop terminates a running run", () => {
    show(reduceAll(fixture("basic_run").slice(0, 5)));
    byTestId("neta-stop").click();
    expect(onAction).toHaveBeenCalledWith({ action: "terminate", requestId: "r_basic" });
  });

  it("Pause suspends a running run; Resume continues a paused one, not one waiting on an ask", () => {
    const running = show(reduceAll(fixture("basic_run").slice(0, 5)));
    expect(byTestId("neta-resume").hidden).toBe(true);
    byTestId("neta-pause").click();
    expect(onAction).toHaveBeenCalledWith({ action: "suspend", requestId: "r_basic" });
    const paused = envelope(
      "MESSAGE_SUSPENDED",
      running.lastSeq + 1,
      { type: "message", suspendReason: { type: "MANUAL_SUSPEND", message: "paused by the user" } },
      "r_basic",
    );
    const suspended = show(reduceAll([...fixture("basic_run").slice(0, 5), paused]));
    expect(byTestId("neta-status").textContent).toBe("Paused");
    expect(byTestId("neta-pause").hidden).toBe(true);
    expect(byTestId("neta-resume").hidden).toBe(false);
    byTestId("neta-resume").click();
    expect(onAction).toHaveBeenLastCalledWith({ action: "resume", requestId: "r_basic" });
    expect(suspended.status).toBe("suspended");

    setup();
    show(reduceAll(until(fixture("permission_resume"), "MESSAGE_SUSPENDED")));
    expect(byTestId("neta-resume").hidden).toBe(true);
    expect(byTestId("neta-pause").hidden).toBe(true);
  });

  it("Retry appears on a recoverable failure only", () => {
    show(reduceAll(fixture("failed_recoverable")));
    expect(byTestId("neta-error").textContent).toContain("The model did not answer in time (LLM_ERROR)");
    expect(byTestId("neta-retry").hidden).toBe(false);
    byTestId("neta-retry").click();
    expect(onAction).toHaveBeenCalledWith({ action: "retry", requestId: "r_fail" });
    // promptTokens is 0: no cache hit rate.
    expect(byTestId("neta-usage").textContent).not.toContain("cache");

    show(reduceAll(fixture("catalogue_rest")));
    expect(byTestId("neta-retry").hidden).toBe(true);
    expect(byTestId("neta-error").textContent).toContain("Stopped by the user");
  });

  it("adds input while running and marks it delivered once consumed", async () => {
    const events = fixture("basic_run");
    const running = show(reduceAll(events.slice(0, 20)));
    const input = byTestId("neta-input") as HTMLTextAreaElement;
    expect(input.closest("[hidden]")).toBeNull();
    input.value = "also plot it";
    byTestId("neta-input-send").click();
    expect(onAction).toHaveBeenCalledWith({ action: "input", requestId: "r_basic", content: "also plot it" });
    await settle();
    expect(input.value).toBe("");
    expect(container.querySelector(".neta-input-list")?.textContent).toContain("queued");
    const consumed = envelope("SUPPLEMENTARY_INPUT_CONSUMED", running.lastSeq + 1, {
      type: "supplementary_input",
      inputId: "in_9",
      content: "also plot it",
    }, "r_basic");
    show(reduceAll([consumed], running));
    expect(container.querySelector(".neta-input-list")?.textContent).toBe("also plot itdelivered");
  });
});

describe("status toasts", () => {
  it("appear, never join the answer, and disappear after a few seconds", () => {
    const events = fixture("basic_run");
    show(reduceAll(until(events, "AGENT_STATUS")));
    const toast = byTestId("neta-toast");
    expect(toast.hidden).toBe(false);
    expect(toast.textContent).toBe("Rate limited, retrying (1/3)");
    expect(byTestId("neta-answer").textContent).not.toContain("Rate limited");
    clock.advance(TOAST_MS);
    expect(toast.hidden).toBe(true);
  });

  it("are cleared by the next tool event", () => {
    const events = fixture("basic_run");
    show(reduceAll(until(events, "AGENT_STATUS")));
    show(reduceAll(until(events, "TOOL_RUNNING")));
    expect(byTestId("neta-toast").hidden).toBe(true);
  });
});

describe("process timeline, todos, long output, step limit", () => {
  it("nests operations by parent with progress bars", () => {
    const events = fixture("process_nested");
    const midway = events.findIndex((e) => e.eventType === "PROCESS_EVENT" && (e.data as { current?: number }).current === 3);
    show(reduceAll(events.slice(0, midway + 1)));
    const cols = container.querySelector<HTMLElement>('[data-operation-id="op_cols"]')!;
    expect(cols.parentElement?.closest("[data-operation-id]")?.getAttribute("data-operation-id")).toBe("op_root");
    expect(cols.querySelector<HTMLElement>(".neta-progress-bar")?.style.width).toBe("75%");
    expect(cols.querySelector(".neta-progress-label")?.textContent).toBe("3/4 · 75%");

    show(reduceAll(events));
    const pairs = container.querySelector<HTMLElement>('[data-operation-id="op_corr_1"]')!;
    expect(pairs.parentElement?.closest("[data-operation-id]")?.getAttribute("data-operation-id")).toBe("op_corr");
    expect(pairs.querySelector(".neta-progress-label")?.textContent).toBe("10/10 · 100%");
    expect(byTestId("neta-process").querySelectorAll('[data-status="completed"]').length).toBe(4);
  });

  it("lists todos and folds long tool output", () => {
    const state = reduceAll(fixture("catalogue_rest"));
    const long = Array.from({ length: 40 }, (_, i) => `line ${i}`).join("\n");
    const next = reduceAll(
      [envelope("TOOL_COMPLETED", state.lastSeq + 1, { type: "tool", toolCallId: "call_x", toolName: "read_file", output: long, truncated: true, outputRef: "/logs/x.txt" }, "r_misc")],
      state,
    );
    show(next);
    expect(all("neta-todo-item").map((li) => li.dataset["status"])).toEqual(["completed", "in_progress"]);
    const card = container.querySelector<HTMLElement>('[data-tool-call-id="call_x"]')!;
    expect(byTestId("neta-tool-output", card).closest("details")).not.toBeNull();
    expect(card.querySelector(".neta-tool-truncated a")?.getAttribute("href")).toContain("%2Flogs%2Fx.txt");
    const failed = container.querySelector<HTMLElement>('[data-tool-call-id="call_f"]')!;
    expect(failed.dataset["status"]).toBe("failed");
    expect(failed.textContent).toContain("Path is outside the server root");
    expect(failed.textContent).toContain("Sign in to read this file");
  });

  it("shows the step limit once, not twice", () => {
    show(reduceAll(fixture("max_steps")));
    expect(byTestId("neta-finish").textContent).toBe("Stopped at the step limit");
    expect(container.querySelector(".neta-synthetic")?.textContent).toContain("step limit (2 steps)");
    expect(container.textContent).not.toContain("Reached the maximum of 2 steps");
  });
});

describe("long answers", () => {
  /** A run whose answer (and reasoning) arrive as deltas of `deltas`; a state after each event. */
  function streamStates(deltas: readonly string[], eventType = "TEXT_DELTA"): RunState[] {
    const type = eventType.startsWith("TEXT") ? "text" : "reasoning";
    let state = reduceAll([envelope(eventType.replace("DELTA", "START"), 1, { type, text: "" })]);
    const states: RunState[] = [];
    deltas.forEach((text, i) => {
      state = reduceAll([envelope(eventType, i + 2, { type, text })], state);
      states.push(state);
    });
    return states;
  }

  /** Let time pass frame by frame until the view asks for nothing more; how many frames went by. */
  function runAllFrames(): number {
    let frames = 0;
    while ((clock.frames.size > 0 || clock.timers.size > 0) && frames < 10_000) {
      clock.advance(16);
      clock.runFrames();
      frames++;
    }
    return frames;
  }

  /** Feed the view one state per frame; the frames that rendered, and the answer's length at each. */
  function streamFrameByFrame(states: readonly RunState[]): { rendersAt: number[]; lengths: number[] } {
    const flush = vi.spyOn(view, "flush");
    const rendersAt: number[] = [];
    const lengths: number[] = [];
    states.forEach((state, frame) => {
      view.update(state);
      clock.advance(16);
      const before = flush.mock.calls.length;
      clock.runFrames();
      if (flush.mock.calls.length > before) rendersAt.push(frame);
      lengths.push(state.answer[0]?.text.length ?? 0);
    });
    return { rendersAt, lengths };
  }

  it("stream a long paragraph in pieces laid out one by one, every frame, and join them once it ends", () => {
    for (const count of [2_000, 12_000]) {
      setup();
      const words = Array.from({ length: count }, (_, i) => `w${i} `);
      const text = words.join("");
      const deltas: string[] = [];
      for (let i = 0; i < words.length; i += 40) deltas.push(words.slice(i, i + 40).join(""));
      const states = streamStates(deltas);
      const { rendersAt } = streamFrameByFrame(states);
      // However long the paragraph grows, a change lays out only its last piece: no frame is skipped.
      expect(rendersAt).toEqual(states.map((_, i) => i));
      const answer = byTestId("neta-answer");
      expect(answer.querySelectorAll("p")).toHaveLength(1);
      const pieces = answer.querySelectorAll("p.neta-md-pieces > span.neta-md-piece");
      expect(pieces.length).toBeGreaterThan(text.length / (2 * PIECE));
      expect(answer.textContent?.trim()).toBe(text.trim());
      // The answer ends: one paragraph again, exactly as marked renders it, unless it is so long
      // that laying it out at once would hold up the page.
      const last = states[states.length - 1] as RunState;
      view.update(reduceAll([envelope("TEXT_END", last.lastSeq + 1, { type: "text" })], last));
      runAllFrames();
      expect(answer.textContent?.trim()).toBe(text.trim());
      if (text.length <= JOIN_LIMIT) {
        expect(answer.querySelector(".neta-md-piece, .neta-md-pieces")).toBeNull();
        expect(answer.querySelector(".neta-md-block")?.innerHTML).toBe(renderBlock(text));
      } else {
        expect(answer.querySelectorAll("p.neta-md-pieces > span.neta-md-piece")).toHaveLength(pieces.length);
      }
    }
  });

  it("wait longer between renders as a block that cannot be cut grows (a code block)", () => {
    const lines = Array.from({ length: 6_000 }, (_, i) => `line ${i}\n`);
    const deltas = ["```\n"];
    for (let i = 0; i < lines.length; i += 20) deltas.push(lines.slice(i, i + 20).join(""));
    const { rendersAt, lengths } = streamFrameByFrame(streamStates(deltas));
    runAllFrames();
    expect(byTestId("neta-answer").querySelector("code")?.textContent).toBe(lines.join("").trimEnd());
    // Early on every frame renders; once the block is four times CHARS_PER_SKIPPED_FRAME long,
    // renders are four frames apart or more.
    expect(rendersAt.slice(0, 10)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const late = rendersAt.filter((at) => (lengths[at] as number) > 4 * CHARS_PER_SKIPPED_FRAME);
    expect(late.length).toBeGreaterThan(3);
    for (let i = 1; i < late.length; i++) expect((late[i] as number) - (late[i - 1] as number)).toBeGreaterThanOrEqual(4);
  });

  it("render a long answer that arrives at once over several frames, then all of it", () => {
    const text = Array.from({ length: 9_000 }, (_, i) => `w${i}`).join(" ");
    const state = reduceAll([
      envelope("TEXT_START", 1, { type: "text", text: "" }),
      envelope("TEXT_DELTA", 2, { type: "text", text }),
    ]);
    view.update(state);
    clock.runFrames();
    const answer = byTestId("neta-answer");
    expect((answer.textContent ?? "").length).toBeLessThan(text.length / 2);
    expect(runAllFrames()).toBeGreaterThan(2);
    expect(answer.textContent?.trim()).toBe(text);
  });

  it("append streamed reasoning to the text already shown", () => {
    const states = streamStates(["Looking ", "at the ", "columns."], "REASONING_DELTA");
    show(states[0] as RunState);
    const segment = container.querySelector(".neta-reasoning-segment") as HTMLElement;
    const node = segment.firstChild;
    show(states[2] as RunState);
    expect(segment.firstChild).toBe(node);
    expect(segment.textContent).toBe("Looking at the columns.");
  });
});

describe("starting over", () => {
  it("redraws from scratch when given a state with fewer seqs", () => {
    show(reduceAll(fixture("basic_run")));
    show(initialState("r_new"));
    expect(all("neta-tool-card")).toHaveLength(0);
    expect(byTestId("neta-answer").hidden).toBe(true);
    expect(byTestId("neta-run").dataset["lastSeq"]).toBe("-1");
  });

  it("dispose cancels the pending frame and removes the DOM", () => {
    view.update(reduceAll(fixture("basic_run")));
    view.dispose();
    expect(clock.frames.size).toBe(0);
    expect(container.children).toHaveLength(0);
  });
});
