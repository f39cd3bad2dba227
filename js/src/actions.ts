/** What the user can ask of a run; each transport turns it into a REST call or a comm message. */

export type Action =
  /** Decide a permission ask (resumeTask). */
  | { readonly action: "resume"; readonly askId: string; readonly approved: boolean; readonly always: boolean }
  /** Answer a clarify request (resumeTask, askId = clarifyId). */
  | { readonly action: "resume"; readonly askId: string; readonly answer: string }
  /** Stop the run (terminateTask). */
  | { readonly action: "terminate" }
  /** Continue a recoverable failure from its failure point (retryTask). */
  | { readonly action: "retry" }
  /** Add input while the run works (addSupplementaryInput). */
  | { readonly action: "input"; readonly content: string };

export type ActionName = Action["action"];
