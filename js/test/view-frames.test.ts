/** How the view renders over frames: batched to one render a frame, long answers in pieces, a fresh start. */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { JOIN_LIMIT, PIECE, renderBlock } from "../src/markdown";
import { reduceAll } from "../src/reducer";
import { initialState, type RunState } from "../src/state";
import { CHARS_PER_SKIPPED_FRAME } from "../src/view/run-view";
import { envelope, fixture } from "./helpers";
import { all, byTestId, clock, container, setup, show, view } from "./view-setup";

beforeEach(setup);

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
