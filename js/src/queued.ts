/**
 * The line a queued prompt's widget shows until its run starts: what it waits for (the `waiting`
 * trait the kernel keeps current, e.g. "Waiting for the prompt above: it needs your approval").
 * Prompts of one conversation run in turn, so a prompt sent while an earlier one waits for the
 * user waits too; this line is how the user learns why nothing happens yet.
 */
export class QueuedLine {
  readonly element: HTMLElement;

  constructor(doc: Document) {
    this.element = doc.createElement("div");
    this.element.className = "neta-queued";
    this.element.dataset["testid"] = "neta-queued";
    this.element.setAttribute("role", "status");
    this.element.hidden = true;
  }

  /** Show `text`; an empty text hides the line (the run has started, or never waited). */
  show(text: string): void {
    this.element.textContent = text;
    this.element.hidden = text === "";
  }
}
