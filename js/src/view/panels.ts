/** The smaller regions: status toast, attachments, todos, footer, error, input. */
import { HISTORY_NOTICE } from "../history";
import type { RunState } from "../state";
import { valuesOf } from "../state";
import { button, h, setData, setText, setVisible, textarea } from "./dom";
import { finishLabel, formatBytes, stoppedText, toastText, usageText, wasStopped } from "./format";
import type { Part, ViewContext } from "./part";

/** How long an AGENT_STATUS toast stays up: it is a transient signal (seed 003 §4). */
export const TOAST_MS = 5000;

/** What credentials the run lacks (its model endpoint's key): stays in view, unlike a toast. */
export class AuthNoticePart implements Part {
  readonly element = h("div", { className: "neta-auth", testid: "neta-auth-notice", attrs: { role: "alert" } });

  constructor() {
    setVisible(this.element, false);
  }

  render(state: RunState, prev: RunState | null): void {
    if (state.authNotices === prev?.authNotices) return;
    this.element.replaceChildren(
      ...state.authNotices.map((n) =>
        h("div", { className: "neta-auth-item" }, [
          h("span", { className: "neta-auth-label", text: "Credentials needed: " }),
          h("span", { className: "neta-auth-message", text: n.message }),
        ]),
      ),
    );
    setVisible(this.element, state.authNotices.length > 0);
  }
}

export class ToastPart implements Part {
  readonly element = h("div", { className: "neta-toast", testid: "neta-toast", attrs: { role: "status" } });
  private shownSeq = -1;
  private timer: unknown = null;

  constructor(private readonly ctx: ViewContext) {
    setVisible(this.element, false);
  }

  render(state: RunState): void {
    const toast = state.toast;
    if (!toast) return this.hide();
    if (toast.seq === this.shownSeq) return;
    this.shownSeq = toast.seq;
    const text = toastText(toast.code, toast.message);
    if (!text) return this.hide();
    setText(this.element, text);
    this.element.className = `neta-toast neta-toast-${toast.level.toLowerCase()}`;
    setData(this.element, "code", toast.code);
    setVisible(this.element, true);
    this.clearTimer();
    this.timer = this.ctx.setTimeout(() => this.hide(), TOAST_MS);
  }

  dispose(): void {
    this.clearTimer();
  }

  private hide(): void {
    this.clearTimer();
    setVisible(this.element, false);
  }

  private clearTimer(): void {
    if (this.timer !== null) this.ctx.clearTimeout(this.timer);
    this.timer = null;
  }
}

/**
 * Paths of the files tool cards show (their pictures, with their chips) or link to (a long
 * output's whole text): an attachment among them is not listed a second time.
 */
function cardFiles(state: RunState): string {
  return valuesOf(state.tools)
    .flatMap((card) => (card.outputRef ? [...card.images, card.outputRef] : card.images))
    .sort()
    .join("\n");
}

export class AttachmentsPart implements Part {
  readonly element = h("ul", { className: "neta-attachments" });
  private shownCardFiles = "";

  constructor(private readonly ctx: ViewContext) {
    setVisible(this.element, false);
  }

  render(state: RunState, prev: RunState | null): void {
    const inCards = prev && state.tools === prev.tools ? this.shownCardFiles : cardFiles(state);
    if (prev && state.attachments === prev.attachments && inCards === this.shownCardFiles) return;
    this.shownCardFiles = inCards;
    const shown = new Set(inCards.split("\n"));
    const items = valuesOf(state.attachments).filter((a) => !shown.has(a.virtualPath)).map((a) => {
      const url = this.ctx.resolveUrl(a.virtualPath);
      const name = url
        ? h("a", { text: a.fileName, attrs: { href: url, download: a.fileName, target: "_blank", rel: "noopener" } })
        : h("span", { text: a.fileName });
      const item = h("li", { className: "neta-attachment", testid: "neta-attachment" }, [name]);
      item.dataset["attachmentId"] = a.attachmentId;
      if (a.fileSize !== undefined) item.append(h("span", { className: "neta-muted", text: formatBytes(a.fileSize) }));
      if (a.changeType === "UPDATED") item.append(h("span", { className: "neta-badge", text: "updated" }));
      if (a.sent) item.append(h("span", { className: "neta-badge", text: "sent" }));
      if (url && a.contentType?.startsWith("image/")) {
        item.append(h("img", { className: "neta-attachment-image", attrs: { src: url, alt: a.fileName } }));
      }
      return item;
    });
    this.element.replaceChildren(...items);
    setVisible(this.element, items.length > 0);
  }
}

const TODO_MARKS: Readonly<Record<string, string>> = { completed: "☑", in_progress: "◐", pending: "☐" };

export class TodoPart implements Part {
  readonly element = h("div", { className: "neta-todo", testid: "neta-todo" });

  constructor() {
    setVisible(this.element, false);
  }

  render(state: RunState, prev: RunState | null): void {
    if (prev && state.todos === prev.todos) return;
    const items = state.todos.map((todo) => {
      const item = h("li", { className: `neta-todo-item neta-todo-${todo.status}`, testid: "neta-todo-item" }, [
        h("span", { className: "neta-todo-mark", text: TODO_MARKS[todo.status] ?? "☐" }),
        h("span", { text: todo.content }),
      ]);
      item.dataset["status"] = todo.status;
      return item;
    });
    this.element.replaceChildren(h("div", { className: "neta-section-title", text: "Plan" }), h("ul", {}, items));
    setVisible(this.element, items.length > 0);
  }
}

/** Finish reason, failure (with Retry), messages from the transport, and token usage. */
export class FooterPart implements Part {
  readonly element = h("div", { className: "neta-footer" });
  private readonly finish = h("div", { className: "neta-finish", testid: "neta-finish" });
  private readonly failure = h("div", { className: "neta-failure" });
  private readonly notice = h("div", { className: "neta-notice-text" });
  private readonly error = h("div", { className: "neta-error", testid: "neta-error", attrs: { role: "alert" } }, [
    this.failure,
    this.notice,
  ]);
  private readonly retry = button("Retry", "neta-retry", "neta-button neta-primary");
  private readonly usage = h("div", { className: "neta-usage", testid: "neta-usage" });
  private readonly history = h("div", { className: "neta-history-note", testid: "neta-history-note" }, [HISTORY_NOTICE]);

  constructor(private readonly ctx: ViewContext) {
    this.element.append(this.finish, this.history, this.error, this.retry, this.usage);
    this.history.hidden = true;
    this.retry.addEventListener("click", () => {
      this.retry.disabled = true;
      void this.ctx.act({ action: "retry" }).then((ok) => (this.retry.disabled = ok));
    });
    this.setNotice(null);
  }

  /** A message from outside the event stream (a refused action, a lost connection), or null. */
  setNotice(message: string | null): void {
    setText(this.notice, message ?? "");
    setVisible(this.notice, Boolean(message));
    setVisible(this.error, Boolean(message) || !this.failure.hidden);
  }

  render(state: RunState, prev: RunState | null): void {
    const done = state.status === "completed" && state.finishReason !== undefined;
    const stopped = wasStopped(state);
    const synthetic = state.answer.some((s) => s.synthetic);
    const message = state.finishMessage && !synthetic ? `: ${state.finishMessage}` : "";
    const finish = done ? `${finishLabel(state.finishReason ?? "STOP")}${message}` : stopped ? stoppedText(state) : "";
    setText(this.finish, finish);
    setData(this.finish, "reason", stopped ? "STOPPED" : (state.finishReason ?? ""));
    setVisible(this.finish, done || stopped);

    const failure = state.status === "failed" && !stopped ? state.failure : null;
    const code = failure?.errorCode ? ` (${failure.errorCode})` : "";
    setText(this.failure, failure ? `${failure.errorMessage || "The run failed"}${code}` : "");
    setVisible(this.failure, failure !== null);
    setVisible(this.error, failure !== null || !this.notice.hidden);
    setVisible(this.retry, failure?.recoverable === true);
    if (state.status !== prev?.status) this.retry.disabled = false;

    setText(this.usage, state.usage ? usageText(state.usage) : "");
    setVisible(this.usage, state.usage !== null);
    setVisible(this.history, state.fromHistory);
  }
}

/** Add input while the agent works; shows what was delivered (SUPPLEMENTARY_INPUT_CONSUMED). */
export class InputPart implements Part {
  readonly element = h("div", { className: "neta-inputs" });
  private readonly list = h("ul", { className: "neta-input-list" });
  private readonly send = button("Send", "neta-input-send", "neta-button neta-primary");
  private readonly area = textarea("neta-input", "Add to the request while the agent works…", () => this.submit());
  private readonly row = h("div", { className: "neta-input-row" }, [this.area, this.send]);
  /** Sent but not yet consumed by the run. */
  private pending: string[] = [];
  private consumed: RunState["inputsConsumed"] = [];

  constructor(private readonly ctx: ViewContext) {
    this.element.append(this.list, this.row);
    this.send.addEventListener("click", () => this.submit());
  }

  render(state: RunState, prev: RunState | null): void {
    setVisible(this.row, state.status === "running");
    if (prev && state.inputsConsumed === prev.inputsConsumed) return;
    for (const input of state.inputsConsumed.slice(this.consumed.length)) {
      const index = this.pending.indexOf(input.content);
      if (index >= 0) this.pending.splice(index, 1);
    }
    this.consumed = state.inputsConsumed;
    this.renderList();
  }

  private async submit(): Promise<void> {
    const content = this.area.value.trim();
    if (!content || this.send.disabled) return;
    this.send.disabled = true;
    const ok = await this.ctx.act({ action: "input", content });
    this.send.disabled = false;
    if (!ok) return;
    this.area.value = "";
    this.pending.push(content);
    this.renderList();
  }

  private renderList(): void {
    const item = (text: string, delivered: boolean) =>
      h("li", { className: delivered ? "neta-input-item neta-delivered" : "neta-input-item" }, [
        h("span", { text }),
        h("span", { className: "neta-muted", text: delivered ? "delivered" : "queued" }),
      ]);
    this.list.replaceChildren(
      ...this.consumed.map((input) => item(input.content, true)),
      ...this.pending.map((text) => item(text, false)),
    );
  }
}
