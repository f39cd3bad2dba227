/** The first token of a block is rendered at once; the deltas after it wait for a frame. */
import { beforeEach, describe, expect, it } from "vitest";
import { reduceAll } from "../src/reducer";
import type { RunState } from "../src/state";
import { envelope, type Envelope } from "./helpers";
import { harness, type Harness } from "./view-harness";

let h: Harness;
let seq = 0;

beforeEach(() => {
  h = harness();
  seq = 0;
});

/** A run that has started; the view has rendered it (a frame went by). */
function started(): RunState {
  const state = apply(reduceAll([]), envelope("SESSION_CREATED", ++seq, { sessionId: "s_1" }));
  h.clock.runFrames();
  return state;
}

/** The view is given `state` plus `events`, as the transport hands them over; returns the new state. */
function apply(state: RunState, ...events: Envelope[]): RunState {
  const next = reduceAll(events, state);
  h.view.update(next);
  return next;
}

function delta(type: "text" | "reasoning", text: string): Envelope {
  return envelope(type === "text" ? "TEXT_DELTA" : "REASONING_DELTA", ++seq, { type, text });
}

function start(type: "text" | "reasoning"): Envelope {
  return envelope(type === "text" ? "TEXT_START" : "REASONING_START", ++seq, { type, text: "" });
}

const answer = (): string => h.byTestId("neta-answer").textContent ?? "";

describe("the first token of a block", () => {
  it("is on the answer's screen without waiting for a frame; the next deltas wait for the frame after the one that paints it", () => {
    let state = apply(started(), start("text"));
    state = apply(state, delta("text", "Hello"));
    expect(answer()).toContain("Hello");
    expect(h.byTestId("neta-answer").hidden).toBe(false);
    state = apply(state, delta("text", " world"));
    apply(state, delta("text", " again"));
    expect(answer()).not.toContain("world");
    h.clock.runFrames(); // the frame that paints "Hello": it renders nothing more
    expect(answer()).not.toContain("world");
    expect(h.clock.frames.size).toBe(1);
    h.clock.runFrames();
    expect(answer()).toContain("Hello world again");
  });

  it("asks for no frame after the one that paints it when nothing came meanwhile", () => {
    const state = apply(started(), start("text"));
    apply(state, delta("text", "Hello"));
    h.clock.runFrames();
    expect(h.clock.frames.size).toBe(0);
    expect(answer()).toContain("Hello");
  });

  it("asks for nothing more once disposed while the first text is painting", () => {
    let state = apply(started(), start("text"));
    state = apply(state, delta("text", "Hello"));
    apply(state, delta("text", " world"));
    h.view.dispose();
    expect(h.clock.frames.size).toBe(0);
  });

  it("counts from the first word: a block that opens with blank lines is rendered at once at its first word", () => {
    let state = apply(started(), start("text"), delta("text", "\n"));
    h.clock.runFrames();
    state = apply(state, delta("text", "Sure"));
    expect(answer()).toContain("Sure");
    apply(state, delta("text", ", here"));
    expect(answer()).not.toContain("here");
  });

  it("is rendered at once for each new block: the answer after the reasoning, a second answer after the first ended", () => {
    let state = apply(started(), start("reasoning"), delta("reasoning", "Looking at the columns"));
    expect(h.byTestId("neta-reasoning").textContent).toContain("Looking at the columns");
    state = apply(state, envelope("REASONING_END", ++seq, { type: "reasoning" }), start("text"), delta("text", "First part."));
    expect(answer()).toContain("First part.");
    state = apply(state, envelope("TEXT_END", ++seq, { type: "text" }));
    h.clock.runFrames();
    state = apply(state, start("text"), delta("text", "Second part."));
    expect(answer()).toContain("Second part.");
    apply(state, delta("text", " More."));
    expect(answer()).not.toContain("More.");
  });

  it("waits for the first frame in a view that has shown nothing yet (a replay arrives at once)", () => {
    apply(reduceAll([]), start("text"), delta("text", "Replayed"));
    expect(answer()).toBe("");
    h.clock.runFrames();
    expect(answer()).toContain("Replayed");
  });
});
