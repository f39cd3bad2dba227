/** The run view: a whole run, figures and files, the prompts, the controls, toasts and the timeline. */
import { beforeEach, describe, expect, it } from "vitest";
import { reduceAll } from "../src/reducer";
import { ARM_DELAY_MS } from "../src/view/guard";
import { TOAST_MS } from "../src/view/panels";
import { envelope, fixture } from "./helpers";
import { all, byTestId, clock, container, onAction, settle, setup, show, until } from "./view-setup";

beforeEach(setup);

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
  it("is shown once, in its tool card, with its file chip; the attachment list leaves it out", () => {
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
    const chip = byTestId("neta-file-chip", byTestId("neta-tool-card"));
    expect(chip.textContent).toBe("plot_1.png12.7 KB");
    expect(chip.getAttribute("href")).toBe(url);
    expect(chip.getAttribute("download")).toBe("plot_1.png");
    const items = all("neta-attachment").map((item) => item.textContent);
    expect(items.some((text) => text?.includes("plot_1.png"))).toBe(false);
    // An image no tool card shows keeps its preview in the list.
    expect(items.some((text) => text?.includes("other.png"))).toBe(true);
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
    // Stopped by the user: no failure, no error code, only what happened.
    expect(byTestId("neta-error").hidden).toBe(true);
    expect(byTestId("neta-finish").textContent).toBe("Stopped");
    expect(byTestId("neta-status").textContent).toBe("Stopped");
    expect(byTestId("neta-status").dataset["status"]).toBe("stopped");
    expect(container.textContent).not.toContain("USER_CANCELLED");
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
