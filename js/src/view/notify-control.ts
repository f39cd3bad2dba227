/**
 * "Notify me": the browser asks the user to allow notifications only when they click this, never
 * on its own (browsers block, and users resent, a permission prompt nobody asked for). Shown while
 * the run may still end later, and only until the browser has an answer.
 */
import type { BrowserNotifications } from "../notify";
import type { RunState } from "../state";
import { button, setVisible } from "./dom";
import type { Part, ViewContext } from "./part";

export class NotifyPart implements Part {
  readonly element = button("Notify me when it ends", "neta-notify", "neta-button neta-notify");
  private asking = false;
  private lastStatus: RunState["status"] = "idle";

  constructor(private readonly ctx: ViewContext, private readonly notifications: BrowserNotifications | null) {
    this.element.title = "Show a browser notification when the run ends while this page is hidden";
    setVisible(this.element, false);
    this.element.addEventListener("click", (event) => {
      if (!this.notifications || this.asking || !this.ctx.guard.deliberate(event, this.element)) return;
      this.asking = true;
      this.element.disabled = true;
      void this.notifications
        .request()
        .catch(() => "default")
        .then(() => {
          this.asking = false;
          this.element.disabled = false;
          this.refresh(this.lastStatus);
        });
    });
  }

  render(state: RunState, prev: RunState | null): void {
    // Reading the permission is a synchronous call into the browser (2 ms on a busy machine):
    // read it when the status changes and after a click, not at every delta's render.
    if (prev && state.status === prev.status) return;
    this.lastStatus = state.status;
    this.refresh(state.status);
  }

  private refresh(status: RunState["status"]): void {
    const undecided = this.notifications?.permission() === "default";
    const mayEnd = status === "idle" || status === "running" || status === "suspended";
    setVisible(this.element, undecided && mayEnd);
  }
}
