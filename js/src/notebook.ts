/**
 * Reverting a notebook edit, and reading which of a run's edits are reverted (after a reload), over
 * the server's notebook endpoints. Reverts are not run events: the answers come from here.
 */
import { cookie, type Fetch, type PageConfig } from "./transport";
import { isRecord, str } from "./wire";

export type RevertAnswer =
  | { readonly outcome: "reverted" }
  /** The server refused: the cell changed after the edit, the edit is unknown, … */
  | { readonly outcome: "refused"; readonly errCode: string; readonly message: string; readonly currentSource?: string }
  /** The request did not get an answer (network, a server error): trying again may work. */
  | { readonly outcome: "failed"; readonly message: string };

export interface NotebookEdits {
  revert(editId: string): Promise<RevertAnswer>;
  /** The ids of the run's edits that are reverted now; empty when that cannot be read. */
  reverted(requestId: string): Promise<ReadonlySet<string>>;
}

const REVERT = "neta/api/notebook/revert";
const EDITS = "neta/api/notebook/edits";

const REFUSALS: Readonly<Record<string, string>> = {
  CELL_CHANGED: "Not reverted: the cell changed after this edit",
  EDIT_NOT_FOUND: "Not reverted: the server does not know this edit",
};

function headers(config: PageConfig, cookies: string | undefined, json: boolean): Record<string, string> {
  const out: Record<string, string> = json ? { "Content-Type": "application/json" } : {};
  const xsrf = cookie("_xsrf", cookies);
  if (xsrf) out["X-XSRFToken"] = xsrf;
  if (config.token) out["Authorization"] = `token ${config.token}`;
  return out;
}

export function serverNotebookEdits(config: PageConfig, fetchImpl: Fetch = (url, init) => fetch(url, init), cookies?: () => string): NotebookEdits {
  const jar = () => (cookies ? cookies() : document.cookie);
  return {
    async revert(editId) {
      let response: Response;
      try {
        response = await fetchImpl(`${config.baseUrl}${REVERT}`, {
          method: "POST",
          credentials: "same-origin",
          headers: headers(config, jar(), true),
          body: JSON.stringify({ editId }),
        });
      } catch {
        return { outcome: "failed", message: "Could not reach the Jupyter server" };
      }
      const body: unknown = await response.json().catch(() => null);
      const fields = isRecord(body) ? body : {};
      const errCode = str(fields["errCode"]) ?? "";
      if (response.ok || errCode === "ALREADY_REVERTED") return { outcome: "reverted" };
      const message = str(fields["message"]) || REFUSALS[errCode] || `The server refused the revert (HTTP ${response.status})`;
      if (response.status >= 500 || !errCode) return { outcome: "failed", message };
      return { outcome: "refused", errCode, message, currentSource: str(fields["currentSource"]) };
    },
    async reverted(requestId) {
      try {
        const url = `${config.baseUrl}${EDITS}?requestId=${encodeURIComponent(requestId)}`;
        const response = await fetchImpl(url, { credentials: "same-origin", headers: headers(config, jar(), false) });
        const body: unknown = await response.json();
        const edits = isRecord(body) && Array.isArray(body["edits"]) ? body["edits"] : [];
        const ids = edits.filter((e) => isRecord(e) && e["reverted"] === true).map((e) => str((e as Record<string, unknown>)["editId"]));
        return new Set(ids.filter((x): x is string => x !== undefined));
      } catch {
        return new Set();
      }
    },
  };
}
