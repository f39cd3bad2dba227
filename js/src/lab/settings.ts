/** The panel's settings (settings/panel.json), its tab's label, and what a notification says. */
import type { RunRow } from "../panel/runs";
import { isRecord, num } from "../wire";

export interface PanelSettings {
  readonly pollSeconds: number;
  readonly notifyAsks: boolean;
  readonly bindToNotebook: boolean;
  readonly area: "left" | "right";
}

export const DEFAULTS: PanelSettings = { pollSeconds: 2, notifyAsks: true, bindToNotebook: true, area: "right" };

/** The settings as the registry holds them; a value of the wrong kind keeps its default. */
export function readSettings(composite: unknown): PanelSettings {
  const given = isRecord(composite) ? composite : {};
  const poll = num(given["pollSeconds"]);
  return {
    pollSeconds: poll !== undefined && poll >= 1 && poll <= 60 ? poll : DEFAULTS.pollSeconds,
    notifyAsks: typeof given["notifyAsks"] === "boolean" ? given["notifyAsks"] : DEFAULTS.notifyAsks,
    bindToNotebook: typeof given["bindToNotebook"] === "boolean" ? given["bindToNotebook"] : DEFAULTS.bindToNotebook,
    area: given["area"] === "left" ? "left" : DEFAULTS.area,
  };
}

/** The tab's label: the count of runs waiting for the user beside the name. */
export function badgeLabel(count: number): string {
  return count > 0 ? `neta (${count})` : "neta";
}

/** What the notification says of runs that began to wait (null: none did). */
export function askNotice(arrived: readonly RunRow[]): string | null {
  const first = arrived[0];
  if (!first) return null;
  const what = first.pendingAsk?.kind === "clarify" ? "has a question" : `asks to run ${first.pendingAsk?.toolName || "a tool"}`;
  const more = arrived.length > 1 ? ` (and ${arrived.length - 1} more)` : "";
  return `A neta run ${what}${more}.`;
}
