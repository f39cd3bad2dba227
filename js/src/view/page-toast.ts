/**
 * The widget's own toast, for a page whose JupyterLab app it cannot reach: fixed in a corner of
 * the page (the run's cell may be scrolled far away), text only, until the user closes it or
 * clicks it to go to the run.
 */
import type { RunEnd } from "../notify";
import { button, h } from "./dom";

const STACK_ID = "neta-page-toasts";

function stack(doc: Document): HTMLElement {
  const found = doc.getElementById(STACK_ID);
  if (found) return found;
  const created = h("div", { className: "neta-page-toasts", attrs: { id: STACK_ID, role: "status", "aria-live": "polite" } });
  doc.body.append(created);
  return created;
}

export function showPageToast(end: RunEnd, onClick: () => void, doc: Document = document): HTMLElement {
  const close = button("×", "neta-page-toast-close", "neta-page-toast-close");
  close.setAttribute("aria-label", "Close");
  const message = h("button", { className: "neta-page-toast-message", attrs: { type: "button" } }, [
    h("strong", { text: end.title }),
    h("span", { text: end.body }),
  ]);
  const toast = h("div", { className: `neta-page-toast neta-page-toast-${end.kind}`, testid: "neta-page-toast" }, [
    message,
    close,
  ]);
  toast.dataset["kind"] = end.kind;
  close.addEventListener("click", () => toast.remove());
  message.addEventListener("click", () => {
    toast.remove();
    onClick();
  });
  stack(doc).append(toast);
  return toast;
}
