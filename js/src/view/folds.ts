/**
 * What the user folded and unfolded in a run's view (a tool's arguments or long output, the
 * reasoning, a sub-agent's row), kept on this page for the next view of the run. JupyterLab makes
 * the widget's view anew whenever the kernel updates the output, at every rest of a run: without
 * this, an output the user opened would close as the run finishes.
 *
 * Only the user's own choices are kept: an element is named for this (`data-fold`) once the user
 * folds or unfolds it, and until then follows the view's defaults. A `<details>` is open or not;
 * any other element says so in `data-open`.
 */

/** Runs whose folds are kept; the oldest are forgotten first. */
const KEPT_RUNS = 500;

const byRun = new Map<string, Map<string, boolean>>();

/** The remembered fold `key` of run `requestId`: open, closed, or unknown (undefined). */
export function rememberedFold(requestId: string, key: string): boolean | undefined {
  return byRun.get(requestId)?.get(key);
}

/** Remember the folds of the view of `requestId` in `root`. */
export function keepFolds(requestId: string, root: HTMLElement): void {
  if (!requestId) return;
  const folds = new Map<string, boolean>();
  for (const element of root.querySelectorAll<HTMLElement>("[data-fold]")) {
    // A child run's view inside this one keeps its own folds, under its own run.
    if (element.closest("[data-testid=neta-run]") !== root) continue;
    const open = element instanceof HTMLDetailsElement ? element.open : element.dataset["open"] === "true";
    folds.set(element.dataset["fold"] as string, open);
  }
  byRun.delete(requestId);
  byRun.set(requestId, folds);
  for (const oldest of byRun.keys()) {
    if (byRun.size <= KEPT_RUNS) break;
    byRun.delete(oldest);
  }
}

/** The fold of the view the user may have chosen (see `ViewContext.fold`). */
export type FoldLookup = (key: string) => boolean | undefined;

/** Keep the user's folding of `details` under `key` from their first click on its summary on. */
export function foldable(details: HTMLElement, key: string): void {
  details.querySelector("summary")?.addEventListener("click", () => (details.dataset["fold"] = key));
}

/**
 * Fold `details` as the user left it in the last view of the run, and keep it so; whether the
 * user had chosen (the view's own default for it then no longer applies).
 */
export function restoreFold(details: HTMLDetailsElement, key: string, fold: FoldLookup): boolean {
  const open = fold(key);
  if (open === undefined) return false;
  details.open = open;
  details.dataset["fold"] = key;
  return true;
}

/** Forget every run's folds (a page that starts over; tests). */
export function forgetFolds(): void {
  byRun.clear();
}
