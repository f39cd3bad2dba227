/**
 * What the person sees is written for a person: the tool results the model reads (hashes,
 * placeholders, internal file names) are shown as a person wants them, calls end with their run, a
 * Stop reads "Stopped", a long prompt is a heading of two lines, a cell's UUID is cut short.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { reduceAll } from "../src/reducer";
import { envelope, type Envelope } from "./helpers";
import { all, byTestId, container, setup, show } from "./view-setup";

beforeEach(() => setup());

const e = (eventType: string, seq: number, data: Record<string, unknown>): Envelope => envelope(eventType, seq, data, "r_person");

function toolCall(seq: number, toolCallId: string, toolName: string, args: Record<string, unknown>): Envelope[] {
  const data = { type: "tool", toolCallId, toolName, arguments: JSON.stringify(args) };
  return [e("TOOL_START", seq, data), e("TOOL_RUNNING", seq + 1, { ...data, title: `Running ${toolName}` })];
}

const done = (seq: number, toolCallId: string, toolName: string, fields: Record<string, unknown>): Envelope =>
  e("TOOL_COMPLETED", seq, { type: "tool", toolCallId, toolName, durationMs: 20, ...fields });

const CELL = "02528e50";
const FIGURE = `/sessions/s_1/r_person/call_8-${CELL}-figure-1.png`;

/** The demo's "add a cell that plots": insert a cell, run it, its figure a file of the run. */
function insertAndPlot(): Envelope[] {
  return [
    e("SESSION_CREATED", 0, { type: "session", sessionId: "s_1" }),
    ...toolCall(1, "call_7", "insert_cell", { source: "sales.units.plot()", position: "end" }),
    e("TOOL_EVENT", 3, {
      type: "tool_side",
      toolCallId: "call_7",
      toolName: "insert_cell",
      category: "notebook_edit",
      userMessage: `insert of cell ${CELL} in work.ipynb`,
      payload: { editId: "ed_1", path: "work.ipynb", cellId: CELL, kind: "insert", diff: `--- cell ${CELL} (before)\n+++ cell ${CELL} (after)\n@@ -0,0 +1 @@\n+sales.units.plot()\n`, via: "shared" },
    }),
    done(4, "call_7", "insert_cell", { output: `insert of cell ${CELL} applied, new hash 36895b1edd.` }),
    ...toolCall(5, "call_8", "run_cell", { cell_id: CELL }),
    done(7, "call_8", "run_cell", { output: "[image: figure-1.png]\n", images: [FIGURE] }),
    e("ATTACHMENT_CHANGED", 8, {
      type: "attachment",
      attachmentId: "att_fig",
      fileName: `call_8-${CELL}-figure-1.png`,
      contentType: "image/png",
      fileSize: 14_540,
      virtualPath: FIGURE,
      source: "AGENT_GENERATED",
      changeType: "CREATED",
    }),
    e("MESSAGE_COMPLETED", 9, { type: "message", finishReason: "STOP" }),
  ];
}

/** The text a person sees: none of what hides in a hidden element. */
function visibleText(root: Node): string {
  if (root instanceof HTMLElement && root.hidden) return "";
  if (root.nodeType === Node.TEXT_NODE) return root.textContent ?? "";
  return [...root.childNodes].map(visibleText).join("");
}

const card = (toolName: string): HTMLElement => {
  const found = all("neta-tool-card").find((c) => c.dataset["toolName"] === toolName);
  if (!found) throw new Error(`no ${toolName} card`);
  return found;
};

describe("a notebook edit's card", () => {
  it("says what it did in words, not the summary written for the model", () => {
    show(reduceAll(insertAndPlot()));
    const insert = card("insert_cell");
    expect(byTestId("neta-edit-what", insert).textContent).toBe("Inserted a cell in work.ipynb");
    expect(insert.textContent).not.toContain("new hash");
    expect(insert.textContent).not.toContain("applied");
    expect(all("neta-tool-output", insert)).toHaveLength(0);
    // The diff (what changed) and the Revert stay.
    expect(byTestId("neta-diff", insert).textContent).toContain("+sales.units.plot()");
  });
});

describe("a picture a call made", () => {
  it("is shown once, with its file chip, and not as the placeholder the model reads", () => {
    show(reduceAll(insertAndPlot()));
    const run = card("run_cell");
    expect(run.textContent).not.toContain("[image:");
    expect(all("neta-tool-output", run)).toHaveLength(0);
    // One picture in the whole view: not again in the list of the run's files.
    expect(container.querySelectorAll("img")).toHaveLength(1);
    expect(all("neta-attachment")).toHaveLength(0);
    // Its chip names the file as the person knows it, with its size and a download link.
    const chip = byTestId("neta-file-chip", run);
    expect(chip.textContent).toBe("figure-1.png14.2 KB");
    expect(chip.getAttribute("download")).toBe("figure-1.png");
    expect(chip.getAttribute("href")).toBe(`/base/download?virtualPath=${encodeURIComponent(FIGURE)}`);
    expect(container.textContent).not.toContain("call_8-");
  });

  it("is a thumbnail on a card whose cell, in the notebook, shows it; whole on a card of code run apart", () => {
    const python = [
      e("SESSION_CREATED", 0, { type: "session", sessionId: "s_1" }),
      ...toolCall(1, "call_3", "python", { code: "df.plot()" }),
      done(3, "call_3", "python", { output: "[image: figure-1.png]\nplotted 3 bars\n", images: ["/sessions/s_1/r_person/call_3-figure-1.png"] }),
    ];
    show(reduceAll(python));
    const figure = byTestId("neta-figure", card("python"));
    expect(figure.classList.contains("neta-figure-thumbnail")).toBe(false);
    expect(byTestId("neta-tool-output", card("python")).textContent).toBe("plotted 3 bars");
    expect(byTestId("neta-file-chip", figure).textContent).toBe("figure-1.png");

    setup();
    show(reduceAll(insertAndPlot()));
    expect(byTestId("neta-figure", card("run_cell")).classList.contains("neta-figure-thumbnail")).toBe(true);
  });

  it("sent inline (no server to keep it), stands for its placeholder all the same", () => {
    const dot = "data:image/png;base64,iVBORw0KGgo=";
    show(reduceAll([...toolCall(0, "call_1", "python", { code: "show()" }), done(2, "call_1", "python", { output: "[image: figure-1.png]\nok\n", images: [dot] })]));
    expect(byTestId("neta-tool-output").textContent).toBe("ok");
    expect(byTestId("neta-figure").querySelector("img")?.getAttribute("src")).toBe(dot);
    expect(byTestId("neta-file-chip").textContent).toBe("figure 1");
  });

  it("keeps a placeholder line of a picture the card does not have", () => {
    const events = [
      ...toolCall(0, "call_1", "python", { code: "show()" }),
      done(2, "call_1", "python", { output: "[image: elsewhere.png]\nok" }),
    ];
    show(reduceAll(events));
    expect(byTestId("neta-tool-output").textContent).toBe("[image: elsewhere.png]\nok");
  });
});

describe("a long output's whole text", () => {
  it("is linked from its card, and not listed again under an internal name", () => {
    const ref = "s_1/r_person/call_2-output.txt";
    show(reduceAll([
      ...toolCall(0, "call_2", "read_notebook", {}),
      done(2, "call_2", "read_notebook", { output: "Notebook work.ipynb: 4 cells.", truncated: true, outputRef: ref }),
      e("ATTACHMENT_CHANGED", 3, { type: "attachment", attachmentId: "att_out", fileName: "call_2-output.txt", contentType: "text/plain", fileSize: 20_990, virtualPath: ref }),
      e("ATTACHMENT_CHANGED", 4, { type: "attachment", attachmentId: "att_csv", fileName: "report.csv", contentType: "text/csv", fileSize: 10, virtualPath: "s_1/r_person/report.csv" }),
    ]));
    expect(card("read_notebook").querySelector(".neta-tool-truncated a")?.getAttribute("href")).toBe(`/base/download?virtualPath=${encodeURIComponent(ref)}`);
    expect(all("neta-attachment").map((item) => item.textContent)).toEqual(["report.csv10 B"]);
  });
});

describe("code and its output", () => {
  it("read apart: the output under a title of its own", () => {
    show(reduceAll([...toolCall(0, "call_1", "python", { code: "print(17*23)" }), done(2, "call_1", "python", { output: "391\n" })]));
    const python = card("python");
    const args = python.querySelector(".neta-tool-args")!;
    const caption = python.querySelector(".neta-tool-caption")!;
    expect(caption.textContent).toBe("Output");
    expect(args.compareDocumentPosition(caption) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    expect(caption.nextElementSibling).toBe(byTestId("neta-tool-output", python));
  });
});

describe("a call that waits for approval", () => {
  const asking = (rule: Record<string, unknown>): Envelope[] => [
    e("SESSION_CREATED", 0, { type: "session", sessionId: "s_1" }),
    e("TOOL_CALL_GENERATING", 1, { type: "tool", toolCallId: "call_1", toolName: "python", arguments: '{"code": "print(17*23)"}' }),
    e("PERMISSION_ASK", 2, { type: "permission_ask", askId: "ask_1", toolName: "python", toolCallId: "call_1", arguments: '{"code": "print(17*23)"}', ...rule }),
    e("MESSAGE_SUSPENDED", 3, { type: "message", suspendReason: { type: "PERMISSION_ASK", askId: "ask_1" } }),
  ];

  it("shows its code once, in the prompt; the card shows it again once approved", () => {
    const events = asking({ ruleDescription: "running code in your kernel needs approval", rulePattern: "python" });
    show(reduceAll(events));
    expect(visibleText(container).split("print(17*23)")).toHaveLength(2);
    expect(byTestId("neta-permission").textContent).toContain("print(17*23)");
    const approved = [
      ...events,
      e("PERMISSION_ASK_RESOLVED", 4, { type: "permission_ask_resolved", askId: "ask_1", approved: true }),
      ...toolCall(5, "call_1", "python", { code: "print(17*23)" }),
    ];
    show(reduceAll(approved));
    expect(card("python").querySelector<HTMLElement>(".neta-tool-args")?.hidden).toBe(false);
    expect(visibleText(container).split("print(17*23)")).toHaveLength(2);
  });

  it.each([
    [{ ruleDescription: "running code in your kernel needs approval", rulePattern: "python" }, "Why: running code in your kernel needs approval."],
    [{ ruleDescription: "tools that change things need approval", rulePattern: "*" }, "Why: tools that change things need approval."],
    [{ ruleDescription: "reading tables asks first", rulePattern: "python code=*read_csv*" }, "Why: reading tables asks first (rule python code=*read_csv*)."],
    [{ ruleDescription: "rule python code=*rm*", rulePattern: "python code=*rm*" }, "Why: a permission rule (rule python code=*rm*)."],
  ])("says why it asks in words, naming a rule only where it says more than the tool (%o)", (rule, words) => {
    show(reduceAll(asking(rule)));
    expect(byTestId("neta-permission-rule").textContent).toBe(words);
  });

  it("names a notebook cell by the short form of its UUID", () => {
    const uuid = "3f2a9c1b-5d4e-4f60-8a7b-9c0d1e2f3a4b";
    show(reduceAll([
      e("SESSION_CREATED", 0, { type: "session", sessionId: "s_1" }),
      e("PERMISSION_ASK", 1, { type: "permission_ask", askId: "ask_1", toolName: "run_cell", toolCallId: "call_1", arguments: JSON.stringify({ cell_id: uuid }), preview: { kind: "code", text: "x = 1", cellId: uuid } }),
      e("MESSAGE_SUSPENDED", 2, { type: "message", suspendReason: { type: "PERMISSION_ASK", askId: "ask_1" } }),
    ]));
    const prompt = byTestId("neta-permission");
    expect(prompt.textContent).toContain("Runs cell 3f2a9c1b:");
    expect(prompt.querySelector(".neta-permission-where")?.textContent).not.toContain(uuid);
  });
});

describe("a notebook edit of a cell with a UUID", () => {
  it("shows the cell's short id in the diff's head lines", () => {
    const uuid = "3f2a9c1b-5d4e-4f60-8a7b-9c0d1e2f3a4b";
    show(reduceAll([
      ...toolCall(0, "call_1", "edit_cell", { cell_id: uuid, source: "y" }),
      e("TOOL_EVENT", 2, {
        type: "tool_side",
        toolCallId: "call_1",
        category: "notebook_edit",
        payload: { editId: "ed_1", path: "work.ipynb", cellId: uuid, kind: "edit", diff: `--- cell ${uuid} (before)\n+++ cell ${uuid} (after)\n@@ -1 +1 @@\n-x\n+y\n` },
      }),
    ]));
    const diff = byTestId("neta-diff");
    expect(diff.textContent).toContain("--- cell 3f2a9c1b (before)");
    expect(diff.textContent).not.toContain(uuid);
    expect(byTestId("neta-edit-what").textContent).toBe("Edited a cell in work.ipynb");
  });
});

describe("calls end with their run", () => {
  it("a call still being prepared when the user stops the run reads stopped, and the run Stopped", () => {
    show(reduceAll([
      e("SESSION_CREATED", 0, { type: "session", sessionId: "s_1" }),
      e("TOOL_CALL_GENERATING", 1, { type: "tool", toolCallId: "call_1", toolName: "python", arguments: '{"code": "pri' }),
      e("MESSAGE_FAILED", 2, { type: "message", errorCode: "USER_CANCELLED", errorMessage: "the run was cancelled", recoverable: false }),
    ]));
    const python = card("python");
    expect(python.dataset["status"]).toBe("stopped");
    expect(python.querySelector(".neta-badge")?.textContent).toBe("stopped");
    expect(byTestId("neta-status").textContent).toBe("Stopped");
    expect(byTestId("neta-finish").textContent).toBe("Stopped");
    expect(byTestId("neta-error").hidden).toBe(true);
    for (const word of ["preparing", "Failed", "USER_CANCELLED", "cancelled"]) expect(container.textContent).not.toContain(word);
  });

  it("a running call's card shows no 'Running …' once the run completed", () => {
    show(reduceAll([
      ...toolCall(0, "call_d", "delegate", { tasks: ["a"] }),
      e("MESSAGE_COMPLETED", 2, { type: "message", finishReason: "STOP" }),
    ]));
    expect(card("delegate").dataset["status"]).toBe("stopped");
    expect(container.textContent).not.toContain("Running delegate");
    expect(container.textContent).not.toContain("running");
  });

  it("a prompt sent in its place says so, without an error", () => {
    show(reduceAll([
      e("SESSION_CREATED", 0, { type: "session", sessionId: "s_1" }),
      e("MESSAGE_FAILED", 1, { type: "message", errorCode: "USER_CANCELLED", errorMessage: "superseded by a new prompt in the same session", recoverable: false }),
    ]));
    expect(byTestId("neta-finish").textContent).toBe("Stopped: superseded by a new prompt in the same session");
    expect(byTestId("neta-error").hidden).toBe(true);
  });

  it("a call stopped with a run that fails and is retried runs again", () => {
    const state = reduceAll([
      ...toolCall(0, "call_1", "python", { code: "1" }),
      e("MESSAGE_FAILED", 2, { type: "message", errorCode: "LLM_ERROR", errorMessage: "model call failed", recoverable: true }),
      e("TOOL_RUNNING", 3, { type: "tool", toolCallId: "call_1", toolName: "python" }),
    ]);
    expect(state.tools.byId["call_1"]?.status).toBe("running");
  });

  it("a sub-agent still at work when its parent was stopped reads Stopped", () => {
    show(reduceAll([
      e("SUBAGENT_RUN_STARTED", 0, { type: "subagent", batchId: "b1", children: [{ requestId: "r_c", agentId: "a1", task: "read notes.txt", status: "running" }] }),
      e("SUBAGENT_EVENT", 1, { type: "subagent", batchId: "b1", childRequestId: "r_c", status: "running", message: "Running read_file" }),
      e("MESSAGE_FAILED", 2, { type: "message", errorCode: "USER_CANCELLED", errorMessage: "the run was cancelled" }),
    ]));
    expect(byTestId("neta-subagent-status").textContent).toBe("Stopped · Running read_file");
  });
});

describe("the prompt as the run's heading", () => {
  const long = "Summarise this log.\n" + "2026-07-24 10:00:00 INFO a line of a pasted log file\n".repeat(3000);

  it("shows a long prompt folded, and all of it once the user asks", () => {
    setup({ prompt: long });
    const body = byTestId("neta-prompt-body");
    const more = byTestId("neta-prompt-more") as HTMLButtonElement;
    expect(byTestId("neta-prompt-text").dataset["folded"]).toBe("true");
    expect(body.textContent!.length).toBeLessThan(1000);
    expect(long.startsWith(body.textContent!)).toBe(true);
    expect(more.hidden).toBe(false);
    expect(more.textContent).toBe("show more");
    more.click();
    expect(body.textContent).toBe(long);
    expect(more.textContent).toBe("show less");
    more.click();
    expect(byTestId("neta-prompt-text").dataset["folded"]).toBe("true");
  });

  it("has no 'show more' for a short prompt", () => {
    setup({ prompt: "what is 17*23?" });
    expect(byTestId("neta-prompt-body").textContent).toBe("what is 17*23?");
    expect(byTestId("neta-prompt-more").hidden).toBe(true);
  });
});

describe("a sub-agent's preview", () => {
  it("is markdown, sanitised: headings and emphasis, never a script, a handler or a style", () => {
    show(reduceAll([
      e("SUBAGENT_RUN_STARTED", 0, { type: "subagent", batchId: "b1", children: [{ requestId: "r_c", agentId: "a1", task: "read notes.txt" }] }),
      e("SUBAGENT_EVENT", 1, {
        type: "subagent",
        batchId: "b1",
        childRequestId: "r_c",
        status: "completed",
        answerPreview: '### What I found\n\n- `notes.txt` has **1** line <img src=x onerror="alert(1)"><style>*{display:none}</style>',
      }),
    ]));
    const preview = byTestId("neta-subagent-preview");
    expect(preview.querySelector("h3")?.textContent).toBe("What I found");
    expect(preview.querySelector("strong")?.textContent).toBe("1");
    expect(preview.textContent).not.toContain("###");
    expect(preview.querySelector("style, script, [onerror], [style]")).toBeNull();
  });
});
