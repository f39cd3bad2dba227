/**
 * Lifetimes as AbortSignals: a view's controller is aborted once, when the view goes, and
 * everything it started was handed its signal (or one derived from it) and ends itself then.
 */

/** A controller that aborts with `parent`, or sooner by its own `abort()`. */
export function childLifetime(parent: AbortSignal | undefined): AbortController {
  const controller = new AbortController();
  if (!parent) return controller;
  if (parent.aborted) controller.abort();
  else parent.addEventListener("abort", () => controller.abort(), { once: true, signal: controller.signal });
  return controller;
}

/** Run `cleanup` once `signal` aborts (at once if it already has). */
export function onAbort(signal: AbortSignal, cleanup: () => void): void {
  if (signal.aborted) cleanup();
  else signal.addEventListener("abort", cleanup, { once: true });
}
