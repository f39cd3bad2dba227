/**
 * Markdown to sanitised HTML (marked, then the strict allowlist of sanitize.ts), and how a long
 * paragraph is cut into pieces that marked reads alone exactly as it reads them in the paragraph
 * (see markdown.ts for how the pieces are shown).
 */
import { Lexer, Marked, Parser, type Token, type Tokens } from "marked";
import { escapeHtml, highlightCode } from "./highlight";
import { sanitizeHtml } from "./sanitize";

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }: Tokens.Code): string {
      const language = (lang ?? "").trim().split(/\s+/)[0] ?? "";
      const cls = language ? ` class="hljs language-${escapeHtml(language)}"` : ` class="hljs"`;
      return `<pre><code${cls}>${highlightCode(text, language)}</code></pre>\n`;
    },
    // A task list's box is a mark, not a form control: rendered content holds no inputs.
    checkbox({ checked }: Tokens.Checkbox): string {
      return checked ? "\u2611 " : "\u2610 ";
    },
  },
});

/** Sanitised HTML of one markdown block. */
export function renderBlock(source: string): string {
  return sanitizeHtml(marked.parse(source, { async: false }));
}

export function lexInline(source: string): Token[] {
  return Lexer.lexInline(source, marked.defaults);
}

/** Sanitised HTML of inline tokens (the content of a paragraph, without the `<p>`). */
export function renderInline(tokens: Token[]): string {
  return sanitizeHtml(Parser.parseInline(tokens, marked.defaults));
}

// --- long paragraphs in pieces --------------------------------------------------------------------

/** Size from which a plain paragraph is cut into pieces, and about the size of each piece. */
export const PIECE = 2048;
/** After a cut point that is not safe, how far to go before trying the next (at least). */
const RETRY = 256;

/**
 * Whether marked reads `line` (whole, or as much of it as has arrived) as text of the paragraph the
 * lines before it started, or for the first line as the start of a paragraph; and it must leave the
 * lines before it alone (a setext underline or a table's delimiter row would not). When in doubt:
 * false, and the block is rendered whole.
 */
export function isParagraphLine(line: string, first: boolean): boolean {
  let lead = 0;
  while (line.charCodeAt(lead) === 32) lead++;
  const rest = line.slice(lead);
  // Spaces only (the rest of the line has not arrived), or a lazy continuation line.
  if (rest === "" || lead >= 4) return !first;
  const c = rest.charAt(0);
  if (c >= "0" && c <= "9") return !(first ? /^\d{1,9}[.)]($|[ \t])/ : /^\d{1,9}[.)][ \t]+\S/).test(rest);
  switch (c) {
    case "*":
      return /^\*+[^\s*]/.test(rest) || (first ? rest === "**" : /^\*{1,2}$/.test(rest));
    case "_":
      return /^_+[^\s_]/.test(rest) || /^_{1,2}$/.test(rest);
    case "`":
      return /^`{1,2}(?!`)/.test(rest);
    case "~":
      return /^~{1,2}(?!~)/.test(rest);
    case "#":
      return /^#+[^\s#]/.test(rest);
    case "=":
      return !first && !/^=+[ \t]*$/.test(rest);
    case "[":
      return !first;
    case "-":
    case "+":
    case ">":
    case "<":
    case "|":
    case ":":
      return false;
    default:
      return !/[\s\x00-\x1f\x7f]/.test(c);
  }
}

/**
 * The cuts of one paragraph into pieces. The first cut point at or after `PIECE` characters where
 * cutting is safe (`pieceTokens`) ends the first piece, and so on; which points are tried depends
 * only on the text, so a paragraph streamed in any chunk sizes is cut where it is cut at once.
 */
export class Pieces {
  /** Offsets in the paragraph's text where the pieces after the first start. */
  readonly starts: number[] = [];
  /** Sanitised HTML of each piece but the last. */
  readonly html: string[] = [];
  /** The next offset to consider as a cut point. */
  private next = PIECE;

  get lastStart(): number {
    return this.starts[this.starts.length - 1] ?? 0;
  }

  /** Finds the cuts that `text` (the paragraph so far, extending the text of the last call) allows. */
  advance(text: string): void {
    let at = this.next;
    while (at < text.length) {
      if (!isCutPoint(text, at)) {
        at++;
        continue;
      }
      const from = this.lastStart;
      const tokens = pieceTokens(text.slice(from, at));
      if (tokens) {
        this.starts.push(at);
        this.html.push(renderInline(tokens));
        at += PIECE;
      } else {
        // Something is still open; it may close soon, or never: try again later, ever less often.
        at += Math.max(RETRY, (at - from) >> 2);
      }
    }
    this.next = at;
  }
}

/** Where a paragraph with this text is cut into pieces (the offsets where pieces after the first start). */
export function pieceStarts(paragraph: string): number[] {
  const pieces = new Pieces();
  pieces.advance(paragraph);
  return [...pieces.starts];
}

const SPACE = /\s/;
const WORD = /[\p{L}\p{N}]/u;

/** A word starts at `at` after exactly one space: no line break or hard break can span the cut. */
function isCutPoint(text: string, at: number): boolean {
  return (
    text.charCodeAt(at - 1) === 32 && at >= 2 && !SPACE.test(text.charAt(at - 2)) && WORD.test(text.charAt(at))
  );
}

/** Inline HTML elements a piece may contain (opened and closed within it). */
const PHRASING = new Set([
  "a", "abbr", "b", "bdi", "bdo", "br", "cite", "code", "data", "del", "dfn", "em", "i", "img", "ins",
  "kbd", "mark", "q", "s", "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr",
]);
const VOID = new Set(["br", "img", "wbr"]);

/**
 * The inline tokens of `piece` if the paragraph may be cut right after it, else null. A cut is
 * safe where nothing that the text after it could still complete is open: every code span, link
 * bracket, link destination, autolink and HTML tag closed, and no `*`, `_` or `~` left over that
 * could still open emphasis or a strikethrough. Then marked reads the piece alone exactly as it
 * reads it inside the whole paragraph.
 */
function pieceTokens(piece: string): Token[] | null {
  if (!closedSyntax(piece)) return null;
  const tokens = lexInline(piece);
  let offset = 0;
  for (const token of tokens) {
    if (token.type === "text" && hasOpener(piece, offset, token.raw.length)) return null;
    offset += token.raw.length;
  }
  if (offset !== piece.length) return null;
  const open: string[] = [];
  return tagsBalanced(tokens, open) && open.length === 0 ? tokens : null;
}

/**
 * Code spans are closed (each backtick run by the next run of its length), link brackets and
 * destinations are closed, and each `<` that could start a tag (the only inline construct besides
 * links and code spans that may hold a space) has its `>`.
 */
function closedSyntax(piece: string): boolean {
  let code = 0;
  let brackets = 0;
  let parens = 0;
  for (let i = 0; i < piece.length; i++) {
    const c = piece.charAt(i);
    if (c === "`") {
      let j = i;
      while (piece.charAt(j) === "`") j++;
      // A run opens a code span that the next run of the same length closes; others are its content.
      if (code === 0) code = j - i;
      else if (code === j - i) code = 0;
      i = j - 1;
    } else if (code > 0) {
      continue;
    } else if (c === "\\") {
      if (piece.charAt(i + 1) === "`") return false;
      i++;
    } else if (c === "[") {
      brackets++;
    } else if (c === "]") {
      if (brackets > 0) brackets--;
      if (piece.charAt(i + 1) === "(") {
        parens++;
        i++;
      }
    } else if (c === "(" && parens > 0) {
      parens++;
    } else if (c === ")" && parens > 0) {
      parens--;
    } else if (c === "<" && /[A-Za-z/!?]/.test(piece.charAt(i + 1))) {
      const close = piece.indexOf(">", i + 1);
      const next = piece.indexOf("<", i + 1);
      if (close < 0 || (next >= 0 && next < close)) return false;
    }
  }
  return code === 0 && brackets === 0 && parens === 0;
}

/**
 * Whether the text token at `offset` (length `length`) of `piece` holds a run of `*`, `_` or `~`
 * that marked could still read as an opener, given more text: one followed by a non-space (an
 * underscore inside a word cannot open). A backtick left as text is open too.
 */
function hasOpener(piece: string, offset: number, length: number): boolean {
  const end = offset + length;
  for (let i = offset; i < end; i++) {
    const c = piece.charAt(i);
    if (c === "`") return true;
    if (c !== "*" && c !== "_" && c !== "~") continue;
    let j = i;
    while (piece.charAt(j) === c) j++;
    const after = piece.charAt(j);
    if (after !== "" && !SPACE.test(after) && !(c === "_" && WORD.test(piece.charAt(i - 1)))) return true;
    i = j - 1;
  }
  return false;
}

/** Raw HTML in the tokens (nested ones too) is inline and each element is closed where it opens. */
function tagsBalanced(tokens: readonly Token[], open: string[]): boolean {
  for (const token of tokens) {
    if (token.type === "html") {
      const raw = String(token.raw);
      if (raw.startsWith("<!--")) continue;
      const tag = /^<(\/?)([a-zA-Z][a-zA-Z0-9-]*)/.exec(raw);
      const name = tag?.[2]?.toLowerCase();
      if (!tag || !name || !PHRASING.has(name)) return false;
      if (tag[1]) {
        if (open.pop() !== name) return false;
      } else if (!VOID.has(name)) {
        open.push(name);
      }
    } else if ("tokens" in token && Array.isArray(token.tokens) && !tagsBalanced(token.tokens, open)) {
      return false;
    }
  }
  return true;
}
