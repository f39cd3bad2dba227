import { describe, expect, it, vi } from "vitest";
import { serverNotebookEdits, type NotebookEdits, type RevertAnswer } from "../src/notebook";
import { reduce, reduceAll } from "../src/reducer";
import { editWords } from "../src/view/edits";
import { envelope, type Envelope } from "./helpers";
import { harness } from "./view-harness";

const HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>';
const DIFF = ["--- cell ab12 (before)", "+++ cell ab12 (after)", "@@ -1,2 +1,2 @@", " import pandas as pd", "-df.head()", `+df.describe()  # ${HOSTILE}`].join("\n") + "\n";

function editPayload(editId = "ed_1") {
  return { editId, path: "work/analysis.ipynb", cellId: "ab12", kind: "edit", diff: DIFF, beforeHash: "1", afterHash: "2", via: "shared", reverted: false };
}

function editRun(editId = "ed_1"): Envelope[] {
  const tool = { type: "tool", toolCallId: "c1", toolName: "edit_cell" };
  return [
    envelope("SESSION_CREATED", 0, { type: "session", sessionId: "s1" }),
    envelope("TOOL_START", 1, { ...tool, arguments: '{"cell_id": "ab12", "source": "df.describe()"}' }),
    envelope("TOOL_EVENT", 2, {
      type: "tool_side",
      toolCallId: "c1",
      toolName: "edit_cell",
      category: "notebook_edit",
      userMessage: "edit of cell ab12 in work/analysis.ipynb",
      payload: editPayload(editId),
    }),
    envelope("TOOL_COMPLETED", 3, { ...tool, output: "edited cell ab12" }),
  ];
}

function fakeNotebook(answers: RevertAnswer[], reverted: string[] = []) {
  const revert = vi.fn(async (_editId: string) => answers.shift() ?? { outcome: "reverted" as const });
  const list = vi.fn(async (_requestId: string) => new Set(reverted));
  const notebook: NotebookEdits = { revert, reverted: list };
  return { notebook, revert, list };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("notebook edits in the reducer", () => {
  it("keeps an applied edit on its call's card, once", () => {
    const events = editRun();
    const state = reduceAll([...events, { ...events[2]!, seq: 4 }]);
    expect(state.tools.byId["c1"]?.edits).toEqual([
      { editId: "ed_1", path: "work/analysis.ipynb", cellId: "ab12", kind: "edit", diff: DIFF, message: "edit of cell ab12 in work/analysis.ipynb", via: "shared" },
    ]);
  });

  it("says in the server's words why an edit went to the file", () => {
    const note = "the file was saved: live edits of open notebooks need the collaboration extension (pip install jupyter-collaboration)";
    const events = editRun();
    const edit = events[2]!;
    const filed = { ...edit, data: { ...edit.data, payload: { ...editPayload(), via: "file", note } } };
    const state = reduceAll([events[0]!, events[1]!, filed]);
    const [applied] = state.tools.byId["c1"]?.edits ?? [];
    expect(applied?.note).toBe(note);
    expect(editWords(applied!)).toBe(`Edited a cell in work/analysis.ipynb (${note})`);
    expect(editWords({ ...applied!, note: undefined })).toBe("Edited a cell in work/analysis.ipynb (the notebook was not open: saved to the file)");
  });

  it("ignores an edit without an id or for a call it never saw", () => {
    const [session, start, edit] = editRun();
    const noId = { ...edit!, data: { ...edit!.data, payload: { diff: "x" } } };
    const otherCall = { ...edit!, data: { ...edit!.data, toolCallId: "c_unknown" } };
    const state = reduceAll([session!, start!, noId, { ...otherCall, seq: 3 }]);
    expect(state.tools.byId["c1"]?.edits).toEqual([]);
  });

  it("reads the preview of a permission ask", () => {
    const ask = (preview: unknown) =>
      reduce(reduceAll(editRun().slice(0, 2)), envelope("PERMISSION_ASK", 2, { type: "permission_ask", askId: "a1", toolName: "edit_cell", arguments: "{}", preview })).permission;
    expect(ask({ kind: "diff", text: DIFF, cellId: "ab12", stale: true })?.preview).toEqual({ kind: "diff", text: DIFF, cellId: "ab12", stale: true });
    expect(ask({ kind: "code", text: "print(1)" })?.preview).toEqual({ kind: "code", text: "print(1)", cellId: undefined, stale: false });
    expect(ask({ kind: "html", text: "<b>" })?.preview).toBeUndefined();
    expect(ask(null)?.preview).toBeUndefined();
  });
});

describe("the edit in its tool card", () => {
  it("shows the diff as text, line by line, nothing of it as markup", () => {
    const t = harness();
    t.show(reduceAll(editRun()));
    const diff = t.byTestId("neta-diff");
    expect(diff.textContent).toBe(DIFF);
    expect(t.container.querySelector("img, script")).toBeNull();
    const classes = [...diff.children].map((line) => line.className.replace("neta-diff-line ", ""));
    expect(classes).toEqual(["neta-diff-meta", "neta-diff-meta", "neta-diff-hunk", "neta-diff-context", "neta-diff-del", "neta-diff-add"]);
    expect([...diff.querySelectorAll("*")].every((node) => node.tagName === "SPAN" && node.childElementCount === 0)).toBe(true);
    expect(t.container.querySelector<HTMLDetailsElement>(".neta-tool-args")?.open).toBe(false);
    // Without a server (embedded) there is nothing to revert with.
    expect(t.byTestId("neta-revert").hidden).toBe(true);
  });

  it("reverts on a deliberate click of the armed button, and then shows the edit reverted", async () => {
    const { notebook, revert } = fakeNotebook([{ outcome: "reverted" }]);
    const t = harness({ notebook });
    t.show(reduceAll(editRun()));
    const button = t.byTestId("neta-revert") as HTMLButtonElement;
    expect(button.hidden).toBe(false);
    button.click(); // not armed yet: it has not been in view long enough
    expect(revert).not.toHaveBeenCalled();
    t.arm();
    t.deliberate = false;
    button.click();
    expect(revert).not.toHaveBeenCalled();
    t.deliberate = true;
    button.click();
    expect(revert).toHaveBeenCalledWith("ed_1");
    await settle();
    const edit = t.byTestId("neta-edit");
    expect(edit.dataset["state"]).toBe("reverted");
    expect(t.byTestId("neta-edit-state").textContent).toBe("reverted");
    expect(button.hidden).toBe(true);
  });

  it("says why a revert was refused, with what the cell reads now, and can be tried again", async () => {
    const refused: RevertAnswer = { outcome: "refused", errCode: "CELL_CHANGED", message: "the cell changed after the edit", currentSource: `x = 1  ${HOSTILE}` };
    const { notebook, revert } = fakeNotebook([refused, { outcome: "failed", message: "Could not reach the Jupyter server" }]);
    const t = harness({ notebook });
    t.show(reduceAll(editRun()));
    t.arm();
    const button = t.byTestId("neta-revert") as HTMLButtonElement;
    button.click();
    await settle();
    const refusal = t.byTestId("neta-revert-refusal");
    expect(refusal.hidden).toBe(false);
    expect(refusal.textContent).toContain("the cell changed after the edit");
    expect(refusal.querySelector("pre")?.textContent).toBe(`x = 1  ${HOSTILE}`);
    expect(t.container.querySelector("img, script")).toBeNull();
    expect(t.byTestId("neta-edit").dataset["state"]).toBe("refused");
    expect(button.disabled).toBe(false);
    button.click();
    await settle();
    expect(revert).toHaveBeenCalledTimes(2);
    expect(refusal.textContent).toBe("Could not reach the Jupyter server");
  });

  it("shows an edit reverted before the page was reloaded as reverted", async () => {
    const { notebook, list } = fakeNotebook([], ["ed_1"]);
    const t = harness({ notebook });
    t.show(reduceAll([...editRun(), ...editRun("ed_2").slice(2).map((e, i) => ({ ...e, seq: 4 + i }))]));
    await settle();
    expect(list).toHaveBeenCalledOnce();
    expect(list).toHaveBeenCalledWith("r_test");
    const states = t.all("neta-edit").map((e) => [e.dataset["editId"], e.dataset["state"]]);
    expect(states).toEqual([["ed_1", "reverted"], ["ed_2", "applied"]]);
  });
});

describe("the permission prompt of a notebook tool", () => {
  function asking(preview: Record<string, unknown>) {
    const t = harness();
    const ask = { type: "permission_ask", askId: "a1", toolName: "edit_cell", toolCallId: "c1", arguments: '{"cell_id": "ab12"}', preview };
    t.show(reduceAll([...editRun().slice(0, 2), envelope("PERMISSION_ASK", 2, ask)]));
    return t;
  }

  it("shows the edit's diff as text, the arguments folded", () => {
    const t = asking({ kind: "diff", text: DIFF, cellId: "ab12" });
    const prompt = t.byTestId("neta-permission");
    expect(t.byTestId("neta-permission-preview", prompt).textContent).toBe(DIFF);
    expect(prompt.querySelector("img, script")).toBeNull();
    expect(prompt.querySelector("details.neta-permission-more .neta-permission-args")).not.toBeNull();
    expect(t.all("neta-permission-stale")).toEqual([]);
  });

  it("warns when the edit would be refused as stale", () => {
    const t = asking({ kind: "diff", text: DIFF, stale: true });
    expect(t.byTestId("neta-permission-stale").textContent).toContain("will be refused");
  });

  it("shows the source of the cell it would run", () => {
    const t = asking({ kind: "code", text: `df.plot()  # ${HOSTILE}`, cellId: "cd34" });
    const prompt = t.byTestId("neta-permission");
    expect(t.byTestId("neta-permission-preview", prompt).textContent).toBe(`df.plot()  # ${HOSTILE}`);
    expect(prompt.textContent).toContain("Runs cell cd34:");
    expect(prompt.querySelector("img, script")).toBeNull();
  });
});

describe("the server's notebook endpoints", () => {
  function replying(status: number, body: unknown) {
    const calls: { url: string; init: RequestInit }[] = [];
    const fetchImpl = async (url: string, init: RequestInit) => {
      calls.push({ url, init });
      return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
    };
    return { calls, edits: serverNotebookEdits({ baseUrl: "/base/", token: "tok" }, fetchImpl, () => "_xsrf=xs1") };
  }

  it("posts the edit id with the XSRF token and reads each answer", async () => {
    const ok = replying(200, { edit: { ...editPayload(), reverted: true } });
    expect(await ok.edits.revert("ed_1")).toEqual({ outcome: "reverted" });
    expect(ok.calls[0]?.url).toBe("/base/neta/api/notebook/revert");
    expect(JSON.parse(String(ok.calls[0]?.init.body))).toEqual({ editId: "ed_1" });
    expect(ok.calls[0]?.init.headers).toMatchObject({ "X-XSRFToken": "xs1", Authorization: "token tok" });
    expect(await replying(409, { errCode: "ALREADY_REVERTED" }).edits.revert("ed_1")).toEqual({ outcome: "reverted" });
    expect(await replying(409, { errCode: "CELL_CHANGED", message: "changed", currentSource: "y" }).edits.revert("ed_1")).toEqual({
      outcome: "refused",
      errCode: "CELL_CHANGED",
      message: "changed",
      currentSource: "y",
    });
    expect(await replying(404, { errCode: "EDIT_NOT_FOUND" }).edits.revert("ed_1")).toMatchObject({ outcome: "refused", message: "Not reverted: the server does not know this edit" });
    expect(await replying(500, "oops").edits.revert("ed_1")).toMatchObject({ outcome: "failed" });
  });

  it("reads which edits of a run are reverted", async () => {
    const list = replying(200, { edits: [{ ...editPayload("ed_1"), reverted: true }, editPayload("ed_2")] });
    expect([...(await list.edits.reverted("r_1"))]).toEqual(["ed_1"]);
    expect(list.calls[0]?.url).toBe("/base/neta/api/notebook/edits?requestId=r_1");
    expect([...(await replying(404, { errCode: "NOT_FOUND" }).edits.reverted("r_x"))]).toEqual([]);
  });
});
