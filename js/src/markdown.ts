/**
 * Streaming markdown that stays cheap for long answers.
 *
 * The text is cut into blocks at blank lines outside code fences. A block is complete once the
 * line after its blank line(s) has arrived; its sanitised HTML is kept and never rendered again.
 * Each update re-renders only the trailing open block. Where a cut falls depends only on the text
 * before it, so streaming in any chunk sizes ends in exactly the HTML of `renderMarkdown(text)`.
 *
 * Model output is untrusted: every block goes through DOMPurify.
 */
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import sql from "highlight.js/lib/languages/sql";
import { Marked, type Tokens } from "marked";

hljs.registerLanguage("python", python);
hljs.registerLanguage("json", json);
hljs.registerLanguage("bash", bash);
hljs.registerLanguage("sql", sql);
hljs.registerAliases(["shell", "sh", "console"], { languageName: "bash" });
hljs.registerAliases(["ipython", "py3"], { languageName: "python" });

const BLOCK_CLASS = "neta-md-block";

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Highlighted HTML of a piece of code; unknown languages are only escaped. */
export function highlightCode(code: string, lang: string | undefined): string {
  const language = (lang ?? "").trim().split(/\s+/)[0]?.toLowerCase() ?? "";
  if (language && hljs.getLanguage(language)) {
    return hljs.highlight(code, { language, ignoreIllegals: true }).value;
  }
  return escapeHtml(code);
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }: Tokens.Code): string {
      const language = (lang ?? "").trim().split(/\s+/)[0] ?? "";
      const cls = language ? ` class="hljs language-${escapeHtml(language)}"` : ` class="hljs"`;
      return `<pre><code${cls}>${highlightCode(text, language)}</code></pre>\n`;
    },
  },
});

let hooksInstalled = false;

function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  // Links in an output cell must never replace the notebook.
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
}

/** Sanitised HTML of one markdown block. */
export function renderBlock(source: string): string {
  installHooks();
  const html = marked.parse(source, { async: false });
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true } });
}

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
// A line that continues the block before it even after a blank line: indented, or a list item.
const CONTINUES = /^(\s|[-*+](\s|$)|\d{1,9}[.)](\s|$))/;

/**
 * Offsets where a new block starts, scanning from `from` (0 or an offset this function returned).
 * A cut needs the whole next line, so a block is never complete before its successor's first line.
 */
export function findBlockStarts(text: string, from = 0): number[] {
  const starts: number[] = [];
  let fence: string | null = null;
  let hasContent = false;
  let afterBlank = false;
  let pos = from;
  for (let nl = text.indexOf("\n", pos); nl >= 0; nl = text.indexOf("\n", pos)) {
    const line = text.slice(pos, nl);
    if (fence === null && afterBlank && hasContent && line.trim() !== "" && !CONTINUES.test(line)) {
      starts.push(pos);
      hasContent = false;
    }
    if (fence !== null) {
      const close = FENCE_CLOSE.exec(line)?.[1];
      if (close && close[0] === fence[0] && close.length >= fence.length) fence = null;
    } else {
      const open = FENCE_OPEN.exec(line)?.[1];
      if (open && !(open[0] === "`" && line.slice(line.indexOf(open) + open.length).includes("`"))) fence = open;
    }
    const blank = line.trim() === "";
    afterBlank = blank && fence === null;
    hasContent = hasContent || !blank;
    pos = nl + 1;
  }
  return starts;
}

function wrap(html: string): string {
  return `<div class="${BLOCK_CLASS}">${html}</div>`;
}

/** The HTML of a whole text at once: what streaming the same text must end in. */
export function renderMarkdown(text: string): string {
  const cuts = [0, ...findBlockStarts(text), text.length];
  const parts: string[] = [];
  for (let i = 0; i + 1 < cuts.length; i++) {
    const source = text.slice(cuts[i], cuts[i + 1]);
    if (source.trim() !== "") parts.push(wrap(renderBlock(source)));
  }
  return parts.join("");
}

/** Renders a growing text into `container`, re-rendering only the open last block. */
export class StreamingMarkdown {
  private source = "";
  /** Offset where the open block starts; everything before it is rendered for good. */
  private done = 0;
  private tail: HTMLElement | null = null;
  private tailSource = "";

  constructor(private readonly container: HTMLElement) {}

  update(text: string): void {
    if (!text.startsWith(this.source)) this.reset();
    this.source = text;
    for (const start of findBlockStarts(text, this.done)) {
      this.completeBlock(text.slice(this.done, start));
      this.done = start;
    }
    this.renderTail(text.slice(this.done));
  }

  reset(): void {
    this.container.replaceChildren();
    this.source = "";
    this.done = 0;
    this.tail = null;
    this.tailSource = "";
  }

  private completeBlock(source: string): void {
    const element = this.tail ?? this.newBlock();
    if (source !== this.tailSource || !this.tail) element.innerHTML = renderBlock(source);
    this.tail = null;
    this.tailSource = "";
  }

  private renderTail(source: string): void {
    if (source.trim() === "") {
      this.tail?.remove();
      this.tail = null;
      this.tailSource = "";
      return;
    }
    if (this.tail && source === this.tailSource) return;
    this.tail = this.tail ?? this.newBlock();
    this.tail.innerHTML = renderBlock(source);
    this.tailSource = source;
  }

  private newBlock(): HTMLElement {
    const element = this.container.ownerDocument.createElement("div");
    element.className = BLOCK_CLASS;
    this.container.append(element);
    return element;
  }
}
