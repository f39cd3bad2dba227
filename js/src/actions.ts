/** What the user can ask of a run; each transport turns it into a REST call or a comm message. */
import type { ActionBodies } from "./api";

export type Action =
  /** Decide a permission ask (resumeTask); `digest`: the ask's, as shown. */
  | {
      readonly action: "resume";
      readonly askId: string;
      readonly approved: boolean;
      readonly always: boolean;
      readonly digest?: string;
    }
  /** Answer a clarify request (resumeTask, askId = clarifyId). */
  | { readonly action: "resume"; readonly askId: string; readonly answer: string }
  /** Continue a paused or interrupted run, which waits on no ask (resumeTask). */
  | { readonly action: "resume" }
  /** Stop the run (terminateTask). */
  | { readonly action: "terminate" }
  /** Pause the run at its next step boundary (suspendTask). */
  | { readonly action: "suspend" }
  /** Continue a recoverable failure from its failure point (retryTask). */
  | { readonly action: "retry" }
  /** Add input while the run works (addSupplementaryInput). */
  | { readonly action: "input"; readonly content: string };

export type ActionName = Action["action"];

/**
 * An action and the run it is for: the view's own run, or a child run it shows (a sub-agent's
 * permission ask answered from the parent's view names the child).
 */
export type RunAction = Action & { readonly requestId: string };

/** Whether each of the view's actions is a body the run API takes for the action of its name. */
type Fits<A> = A extends RunAction ? (Omit<A, "action"> extends ActionBodies[A["action"]] ? true : false) : never;
const viewActionsFitTheApi: false extends Fits<RunAction> ? never : true = true;
void viewActionsFitTheApi;
