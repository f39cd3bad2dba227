/** Reasoning (collapsible, apart) and the answer (streaming markdown). */
import { StreamingMarkdown, UPDATE_BUDGET } from "../markdown";
import { loadImagesOnClick } from "../sanitize";
import type { RunState, TextSegment } from "../state";
import { h, setGrowingText, setText, setVisible } from "./dom";
import { foldable, restoreFold } from "./folds";
import type { Part, ViewContext } from "./part";

export class ReasoningPart implements Part {
  readonly element = h("details", { className: "neta-reasoning", testid: "neta-reasoning" });
  private readonly summary = h("summary", { text: "Reasoning" });
  private readonly body = h("div", { className: "neta-reasoning-body" });
  private userToggled = false;

  constructor(private readonly ctx: ViewContext) {
    this.element.append(this.summary, this.body);
    setVisible(this.element, false);
    // A click (or Enter/Space) on the summary is the user's choice; keep it from then on.
    this.summary.addEventListener("click", () => (this.userToggled = true));
    foldable(this.element, "reasoning");
  }

  render(state: RunState, prev: RunState | null): void {
    if (prev && state.reasoning === prev.reasoning) return;
    if (!prev && restoreFold(this.element, "reasoning", this.ctx.fold)) this.userToggled = true;
    const segments = state.reasoning.filter((s) => s.text.trim() !== "");
    setVisible(this.element, segments.length > 0);
    syncChildren(this.body, segments.length, () => h("div", { className: "neta-reasoning-segment" }));
    segments.forEach((segment, i) => setGrowingText(this.body.children[i] as HTMLElement, segment.text));
    const thinking = state.reasoning.some((s) => s.open);
    setText(this.summary, thinking ? "Thinking…" : "Reasoning");
    // Open while the model thinks, folded once it is done, unless the user chose otherwise.
    if (!this.userToggled && this.element.open !== thinking) this.element.open = thinking;
  }
}

class SegmentView {
  readonly element = h("div", { className: "neta-segment" });
  readonly markdown = new StreamingMarkdown(this.element, UPDATE_BUDGET);
  /** Part of the text is not shown yet (more arrived at once than one update renders). */
  pending = false;

  render(segment: TextSegment): void {
    this.element.classList.toggle("neta-synthetic", segment.synthetic);
    this.element.classList.toggle("neta-open", segment.open);
    this.pending = !this.markdown.update(segment.text);
    if (!segment.open && !this.pending) this.markdown.finish();
  }
}

export class AnswerPart implements Part {
  readonly element = h("div", { className: "neta-answer", testid: "neta-answer" });
  private readonly segments: SegmentView[] = [];

  constructor() {
    setVisible(this.element, false);
    loadImagesOnClick(this.element);
  }

  /** Some text is not shown yet: render again at the next frame, even with the same state. */
  get pending(): boolean {
    return this.segments.some((view) => view.pending);
  }

  /** Length of what a change to the segments still growing makes the browser lay out again. */
  get openLength(): number {
    let length = 0;
    for (const view of this.segments) {
      if (view.pending || view.element.classList.contains("neta-open")) length += view.markdown.openLength;
    }
    return length;
  }

  render(state: RunState, prev: RunState | null): void {
    if (prev && state.answer === prev.answer && !this.pending) return;
    while (this.segments.length > state.answer.length) this.segments.pop()?.element.remove();
    state.answer.forEach((segment, i) => {
      let view = this.segments[i];
      if (!view) {
        view = new SegmentView();
        this.segments.push(view);
        this.element.append(view.element);
      }
      if (segment !== prev?.answer[i] || !prev || view.pending) view.render(segment);
    });
    setVisible(this.element, state.answer.some((s) => s.text !== ""));
  }
}

/** Make `parent` have exactly `count` children, creating new ones with `make`. */
function syncChildren(parent: HTMLElement, count: number, make: () => HTMLElement): void {
  while (parent.children.length > count) parent.lastElementChild?.remove();
  while (parent.children.length < count) parent.append(make());
}
