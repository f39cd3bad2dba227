import { beforeEach, describe, expect, it } from "vitest";
import { mount } from "../src/widget";
import { FakeModel } from "./fake-model";

let el: HTMLElement;

beforeEach(() => {
  document.body.replaceChildren();
  el = document.createElement("div");
  document.body.append(el);
});

const line = () => el.querySelector<HTMLElement>('[data-testid="neta-queued"]')!;

describe("a queued prompt's widget", () => {
  it("says what it waits for, follows the kernel's changes, and clears once the run starts", () => {
    const waiting = "Waiting for the prompt above: it needs your approval.";
    const model = new FakeModel({ request_id: "", mode: "server", prompt: "plot it", snapshot: {}, waiting });
    const cleanup = mount(model, el);
    expect(line().hidden).toBe(false);
    expect(line().textContent).toBe(waiting);

    model.set("waiting", "Waiting for the 2 prompts above to finish.");
    expect(line().textContent).toBe("Waiting for the 2 prompts above to finish.");

    model.set("waiting", "");
    expect(line().hidden).toBe(true);
    cleanup();
  });

  it("shows no line for a prompt that never waited", () => {
    const model = new FakeModel({ request_id: "r_1", mode: "embedded", prompt: "hi", snapshot: {} });
    mount(model, el);
    expect(line().hidden).toBe(true);
  });
});
