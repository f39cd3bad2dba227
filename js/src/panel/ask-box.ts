/**
 * The panel's prompt: a question for a new run, the model it runs on, and whether it is bound to
 * the active notebook and its kernel. Runs started here continue one conversation (a session)
 * until the user starts a new one.
 */
import { button, h, setText, textarea } from "../view/dom";
import type { Models } from "./client";

/** The notebook a run from the panel is bound to: its path and its kernel, if it has one. */
export interface NotebookTarget {
  readonly path: string;
  readonly kernelId: string | null;
}

export interface Ask {
  readonly content: string;
  readonly model: string | null;
  readonly notebook: NotebookTarget | null;
}

export class AskBox {
  readonly element: HTMLElement;
  readonly input: HTMLTextAreaElement;
  private readonly models: HTMLSelectElement;
  private readonly bind: HTMLInputElement;
  private readonly target: HTMLElement;
  private readonly send: HTMLButtonElement;
  private readonly error: HTMLElement;

  constructor(
    private readonly submit: (ask: Ask) => Promise<void>,
    private readonly activeNotebook: () => NotebookTarget | null,
    readonly newConversation: () => void,
  ) {
    this.input = textarea("neta-panel-prompt", "Ask neta… (Ctrl+Enter sends)", () => void this.go());
    this.input.classList.add("neta-panel-prompt-box");
    this.models = h("select", { className: "neta-panel-models", testid: "neta-panel-model", attrs: { "aria-label": "Model" } });
    this.bind = h("input", { testid: "neta-panel-bind", attrs: { type: "checkbox" } });
    this.bind.checked = true;
    this.target = h("span", { className: "neta-panel-target", testid: "neta-panel-target" });
    this.send = button("Ask", "neta-panel-send", "neta-button neta-button-primary");
    this.send.addEventListener("click", () => void this.go());
    const fresh = button("New conversation", "neta-panel-new", "neta-button");
    fresh.addEventListener("click", () => newConversation());
    this.error = h("p", { className: "neta-panel-error", testid: "neta-panel-ask-error" });
    this.error.hidden = true;
    const bindLabel = h("label", { className: "neta-panel-bind" }, [this.bind, this.target]);
    this.element = h("section", { className: "neta-panel-ask-box" }, [
      this.input,
      h("div", { className: "neta-panel-ask-row" }, [this.models, this.send, fresh]),
      bindLabel,
      this.error,
    ]);
    this.refreshTarget();
  }

  /** Bind new runs to the active notebook by default (a setting). */
  setBindDefault(bind: boolean): void {
    this.bind.checked = bind;
  }

  setModels(models: Models): void {
    const options = models.models.map((name) => h("option", { text: name, attrs: { value: name } }));
    this.models.replaceChildren(...options);
    if (models.default) this.models.value = models.default;
  }

  /** Say which notebook a run would be bound to now (the active one changed). */
  refreshTarget(): void {
    const notebook = this.activeNotebook();
    setText(this.target, notebook ? `Use ${notebook.path}${notebook.kernelId ? " and its kernel" : ""}` : "No notebook open: the run is bound to none");
    this.bind.disabled = notebook === null;
  }

  focus(): void {
    this.input.focus();
  }

  private async go(): Promise<void> {
    const content = this.input.value.trim();
    if (!content || this.send.disabled) return;
    this.send.disabled = true;
    this.error.hidden = true;
    try {
      const notebook = this.bind.checked ? this.activeNotebook() : null;
      await this.submit({ content, model: this.models.value || null, notebook });
      this.input.value = "";
    } catch (error) {
      setText(this.error, error instanceof Error ? error.message : String(error));
      this.error.hidden = false;
    } finally {
      this.send.disabled = false;
    }
  }
}
