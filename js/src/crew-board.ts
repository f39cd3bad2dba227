/**
 * The crew board (its own anywidget module): a crew's tasks with their live status, the
 * decisions it waits for with buttons to take them, its controls and its latest log lines.
 *
 * The kernel keeps the board's state in the `board` trait and redraws nothing: every change of
 * the trait redraws the view. Everything shown comes from agents or files, so it goes in as
 * text only. A click sends a `DecideMessage` or a `ControlMessage` to the kernel, which applies it
 * to the crew; the board changes once the crew's log says it did. The trait and the messages are
 * typed from the comm schema (`neta_jupyter/widgets/board.py`).
 *
 * A task opens into the live view of its run (crew-runs.ts): followed from the page's server when
 * the crew runs there (`mode` "server"), else through this widget's comm, as the run widget does.
 */
import type {
  BoardEscalation,
  BoardMessage,
  BoardTask,
  ControlMessage,
  CrewBoardState,
  DecideMessage,
} from "./comm-types";
import { TaskRuns } from "./crew-runs";

interface BoardModel {
  get(name: "board"): unknown;
  on(name: string, callback: (...args: unknown[]) => void): void;
  off(name: string, callback: (...args: unknown[]) => void): void;
  send(content: BoardMessage | Record<string, unknown>): void;
}

interface RenderContext {
  readonly model: BoardModel;
  readonly el: HTMLElement;
}

/** A task's row as drawn: the trait's `BoardTask` with every field filled in. */
type Task = Required<BoardTask>;

type Escalation = BoardEscalation;

/** The `board` trait (`CrewBoardState`, from the comm schema) with every field filled in. */
interface Board extends Required<Omit<CrewBoardState, "mode" | "tasks" | "escalations">> {
  /** `server` or `embedded`; "" when the trait does not say. */
  mode: string;
  tasks: Task[];
  escalations: Escalation[];
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

function str(value: unknown): string {
  return typeof value === "string" ? value : typeof value === "number" ? String(value) : "";
}

function num(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) ? value : 0;
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** The trait as a board, whatever it holds. */
export function readBoard(value: unknown): Board {
  const raw = record(value);
  return {
    name: str(raw.name),
    mode: str(raw.mode),
    status: str(raw.status) || "queued",
    message: str(raw.message),
    tasks: list(raw.tasks).map((item) => {
      const t = record(item);
      return {
        taskId: str(t.taskId),
        agent: str(t.agent),
        status: str(t.status) || "pending",
        attempt: num(t.attempt),
        tokens: num(t.tokens),
        childRequestId: str(t.childRequestId),
      };
    }),
    escalations: list(raw.escalations).map((item) => {
      const e = record(item);
      return {
        escalationId: str(e.escalationId),
        taskId: str(e.taskId),
        kind: str(e.kind),
        message: str(e.message),
      };
    }),
    log: list(raw.log).map(str),
  };
}

function node(tag: string, testid: string, text = ""): HTMLElement {
  const el = document.createElement(tag);
  if (testid) el.dataset.testid = testid;
  if (text) el.textContent = text;
  return el;
}

function button(label: string, testid: string, onClick: () => void): HTMLButtonElement {
  const el = node("button", testid, label) as HTMLButtonElement;
  el.type = "button";
  el.className = "neta-button";
  el.addEventListener("click", onClick);
  return el;
}

const APPROVALS = new Set(["approval_before", "approval_after", "permission"]);
const ENDED = new Set(["completed", "failed", "stopped"]);

const COLUMNS = ["", "task", "agent", "status", "attempt", "tokens", "run"];

/** The task's row, and below it, when the task is open, its run's live view. */
function taskRows(task: Task, runs: TaskRuns, redraw: () => void): HTMLElement[] {
  const row = node("tr", "neta-crew-task");
  row.dataset.task = task.taskId;
  row.dataset.status = task.status;
  const open = runs.isOpen(task.taskId);
  const toggle = button(open ? "▾" : "▸", "neta-crew-expand", () => {
    runs.toggle(task.taskId, task.childRequestId);
    redraw();
  });
  toggle.setAttribute("aria-expanded", String(open));
  toggle.title = open ? "Hide this task's run" : "Show this task's run";
  const first = node("td", "");
  first.append(toggle);
  row.append(first);
  const cells = [
    task.taskId,
    task.agent,
    task.status,
    task.attempt ? String(task.attempt) : "",
    task.tokens ? String(task.tokens) : "",
    task.childRequestId,
  ];
  for (const text of cells) row.append(node("td", "", text));
  const view = runs.view(task.taskId, task.childRequestId);
  return view ? [row, detailRow(task.taskId, view)] : [row];
}

/** The row under an open task holding its run's view: one per view, kept between redraws. */
const detailRows = new WeakMap<HTMLElement, HTMLElement>();

function detailRow(taskId: string, view: HTMLElement): HTMLElement {
  const known = detailRows.get(view);
  if (known) return known;
  const detail = node("tr", "neta-crew-task-run");
  detail.dataset.task = taskId;
  const cell = node("td", "");
  (cell as HTMLTableCellElement).colSpan = COLUMNS.length;
  cell.append(view);
  detail.append(cell);
  detailRows.set(view, detail);
  return detail;
}

/**
 * Make `parent`'s children `wanted`, never moving one that stays: an open run's view keeps its
 * place (and the focus of whatever in it has focus, an answer being typed) while the rows
 * around it are drawn again.
 */
function placeChildren(parent: HTMLElement, wanted: readonly HTMLElement[]): void {
  const keep = new Set<Node>(wanted);
  for (const child of [...parent.childNodes]) if (!keep.has(child)) child.remove();
  let cursor = parent.firstChild;
  for (const item of wanted) {
    if (item === cursor) cursor = cursor.nextSibling;
    else parent.insertBefore(item, cursor);
  }
}

function escalationItem(escalation: Escalation, model: BoardModel): HTMLElement {
  const item = node("li", "neta-crew-escalation");
  item.dataset.task = escalation.taskId;
  item.dataset.kind = escalation.kind;
  item.append(node("span", "", escalation.message));
  const decide = (fields: Omit<DecideMessage, "type" | "escalationId">) => () =>
    model.send({ type: "decide", escalationId: escalation.escalationId, ...fields } satisfies DecideMessage);
  if (APPROVALS.has(escalation.kind)) {
    item.append(button("Approve", "neta-crew-approve", decide({ decision: "answer", approved: true })));
  } else {
    // A question (or a failed task, retried with the answer as a note): the person's words.
    const answer = node("input", "neta-crew-answer") as HTMLInputElement;
    answer.placeholder = escalation.kind === "question" ? "your answer" : "a note for the next attempt";
    answer.setAttribute("data-lm-suppress-shortcuts", "true");
    answer.addEventListener("keydown", (event) => event.stopPropagation());
    const send = () => decide({ decision: "answer", answer: answer.value })();
    item.append(answer, button("Answer", "neta-crew-send-answer", send));
  }
  item.append(button("Retry", "neta-crew-retry", decide({ decision: "retry" })));
  item.append(button("Skip", "neta-crew-skip", decide({ decision: "skip", output: "" })));
  item.append(button("Stop", "neta-crew-stop-here", decide({ decision: "stop" })));
  return item;
}

interface Frame {
  readonly root: HTMLElement;
  readonly table: HTMLElement;
  readonly header: HTMLElement;
  readonly waits: HTMLElement;
  /** Each open escalation's item, kept while it is open (with the answer being typed in it). */
  readonly items: Map<string, HTMLElement>;
}

function frame(el: HTMLElement): Frame {
  const root = node("div", "neta-crew");
  root.className = "neta-crew";
  const table = node("table", "neta-crew-tasks");
  const header = node("tr", "");
  for (const title of COLUMNS) header.append(node("th", "", title));
  el.replaceChildren(root);
  return { root, table, header, waits: node("ul", "neta-crew-escalations"), items: new Map() };
}

function draw(parts: Frame, board: Board, model: BoardModel, runs: TaskRuns, redraw: () => void): void {
  const { root, table, header, waits, items } = parts;
  root.dataset.status = board.status;
  const tokens = board.tasks.reduce((sum, task) => sum + task.tokens, 0);
  const usage = tokens > 0 ? ` · ${tokens.toLocaleString("en-US")} tokens` : "";
  const head = node("div", "neta-crew-status", `crew ${board.name} · ${board.status}${usage}`);
  if (board.message) head.append(node("span", "", ` · ${board.message}`));
  placeChildren(table, [header, ...board.tasks.flatMap((task) => taskRows(task, runs, redraw))]);
  const sections = [head, table];
  const open = new Set(board.escalations.map((e) => e.escalationId));
  for (const id of [...items.keys()]) if (!open.has(id)) items.delete(id);
  const shown = board.escalations.map((e) => {
    const item = items.get(e.escalationId) ?? escalationItem(e, model);
    items.set(e.escalationId, item);
    return item;
  });
  placeChildren(waits, shown);
  if (shown.length > 0) sections.push(waits);
  if (!ENDED.has(board.status)) {
    const controls = node("div", "neta-crew-controls");
    const control = (action: ControlMessage["action"]) => () => model.send({ type: "control", action } satisfies ControlMessage);
    controls.append(
      board.status === "paused"
        ? button("Resume", "neta-crew-resume", control("resume"))
        : button("Pause", "neta-crew-pause", control("pause")),
      button("Stop", "neta-crew-stop", control("stop")),
    );
    sections.push(controls);
  }
  sections.push(node("pre", "neta-crew-log", board.log.join("\n")));
  placeChildren(root, sections);
}

function render({ model, el }: RenderContext): () => void {
  const lifetime = new AbortController();
  const runs = new TaskRuns(model, () => readBoard(model.get("board")).mode, lifetime.signal);
  const shown = frame(el);
  const redraw = (): void => draw(shown, readBoard(model.get("board")), model, runs, redraw);
  model.on("change:board", redraw);
  redraw();
  return () => {
    model.off("change:board", redraw);
    lifetime.abort();
  };
}

export default { render };
