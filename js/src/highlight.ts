/** Syntax highlighting of code in answers, tool arguments and permission prompts (highlight.js). */
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import sql from "highlight.js/lib/languages/sql";
import type { LanguageFn } from "highlight.js";

/**
 * The languages code is highlighted in, by every name they go by. A language's grammar is built
 * when it is registered, which takes milliseconds: so on its first use, not when the module loads.
 */
const LANGUAGES = new Map<string, readonly [string, LanguageFn]>([
  ["python", ["python", python]],
  ["ipython", ["python", python]],
  ["py3", ["python", python]],
  ["json", ["json", json]],
  ["bash", ["bash", bash]],
  ["shell", ["bash", bash]],
  ["sh", ["bash", bash]],
  ["console", ["bash", bash]],
  ["sql", ["sql", sql]],
]);

/** The registered name of a language we highlight, registering it if need be; else undefined. */
function highlightLanguage(name: string): string | undefined {
  const known = LANGUAGES.get(name);
  if (!known) return undefined;
  const [canonical, definition] = known;
  if (!hljs.getLanguage(canonical)) hljs.registerLanguage(canonical, definition);
  return canonical;
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Highlighted HTML of a piece of code; unknown languages are only escaped. */
export function highlightCode(code: string, lang: string | undefined): string {
  const language = highlightLanguage((lang ?? "").trim().split(/\s+/)[0]?.toLowerCase() ?? "");
  return language ? hljs.highlight(code, { language, ignoreIllegals: true }).value : escapeHtml(code);
}
