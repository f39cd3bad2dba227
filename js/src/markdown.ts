/**
 * Streaming markdown that stays cheap for long answers.
 *
 * The text is cut into blocks at blank lines outside code fences. A block is complete once the
 * line after its blank line(s) has arrived; its sanitised HTML is kept and never rendered again.
 * Each update re-renders only the trailing open block.
 *
 * An open block that is one long plain paragraph would still cost its whole length per update, so
 * such a paragraph is cut further, into pieces of about `PIECE` characters at points where no inline
 * construct is open (see `pieceTokens`). Each piece is rendered once, with marked's inline renderer;
 * only the last piece is rendered again as text arrives. As soon as a line shows that the block is
 * not a plain paragraph (a setext underline, a table, a list…), the block is rendered whole again.
 *
 * The browser, too, would lay out the whole paragraph again on every change. So while it is being
 * written, each piece is a block of its own (`<span class="neta-md-piece">`, shown as a block, in
 * `<p class="neta-md-pieces">`) and a change lays out only the last one; its lines end where its
 * piece ends. Once the paragraph is finished (the block is complete, or `finish()` says the text
 * is), the pieces become one paragraph again, laid out once; except in a paragraph longer than
 * `JOIN_LIMIT` (which models do not write, but a runaway answer may), whose one layout would
 * hold up the page for tens of milliseconds: it stays in pieces.
 *
 * Where any cut falls depends only on the text before it, so streaming in any chunk sizes and then
 * finishing ends in exactly the HTML of `renderMarkdown(text)`, which is marked's (for paragraphs
 * up to `JOIN_LIMIT`; longer ones have its text and formatting). Model output is untrusted: all
 * HTML, whole blocks and pieces alike, goes through the strict sanitiser of sanitize.ts.
 */
import { lexInline, PIECE, Pieces, renderBlock, renderInline, isParagraphLine } from "./markdown-inline";
import { morph } from "./morph";

export { highlightCode } from "./highlight";
export { isParagraphLine, PIECE, pieceStarts, renderBlock } from "./markdown-inline";

const BLOCK_CLASS = "neta-md-block";
/** A paragraph being written in pieces, and each of its pieces (see styles.css). */
const PIECES_CLASS = "neta-md-pieces";
const PIECE_CLASS = "neta-md-piece";

// --- blocks ----------------------------------------------------------------------------------------

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
// A line that continues the block before it even after a blank line: indented, or a list item.
const CONTINUES = /^(\s|[-*+](\s|$)|\d{1,9}[.)](\s|$))/;
// A first character that no such line (nor a blank one) starts with: the line starts a block.
const STARTS_BLOCK = /[^\s\-*+\d]/;

/**
 * Finds where blocks start in a growing text. It keeps its place, so each call reads only the lines
 * completed since the last one: a long line is not searched again for its end.
 */
class BlockScanner {
  private fence: string | null = null;
  private hasContent = false;
  private afterBlank = false;
  /** Start of the line being written, and how far it has been searched for its newline. */
  private pos: number;
  private searched: number;

  constructor(from = 0) {
    this.pos = from;
    this.searched = from;
  }

  /** Block starts completed in `text`, which extends the text of the previous call. */
  scan(text: string): number[] {
    const starts: number[] = [];
    for (let nl = text.indexOf("\n", this.searched); nl >= 0; nl = text.indexOf("\n", this.pos)) {
      const line = text.slice(this.pos, nl);
      const blank = line.trim() === "";
      if (this.fence === null && this.afterBlank && this.hasContent && !blank && !CONTINUES.test(line)) {
        starts.push(this.pos);
        this.hasContent = false;
      }
      if (this.fence !== null) {
        const close = FENCE_CLOSE.exec(line)?.[1];
        if (close && close[0] === this.fence[0] && close.length >= this.fence.length) this.fence = null;
      } else {
        const open = FENCE_OPEN.exec(line)?.[1];
        if (open && !(open[0] === "`" && line.slice(line.indexOf(open) + open.length).includes("`"))) this.fence = open;
      }
      this.afterBlank = blank && this.fence === null;
      this.hasContent = this.hasContent || !blank;
      this.pos = nl + 1;
    }
    this.searched = Math.max(this.pos, text.length);
    // The line being written starts a block as soon as its first character says so: the last
    // paragraph of an answer, often one long line, is a block of its own while it is written.
    if (this.fence === null && this.afterBlank && this.hasContent && STARTS_BLOCK.test(text.charAt(this.pos))) {
      starts.push(this.pos);
      this.hasContent = false;
    }
    return starts;
  }
}

/**
 * Offsets where a new block starts, scanning from `from` (0 or an offset this function returned).
 * A cut needs the next line's first character, or the whole line where that character could
 * start a list item or an indented line: a block is complete once its successor has begun.
 */
export function findBlockStarts(text: string, from = 0): number[] {
  return new BlockScanner(from).scan(text);
}

/** The HTML of a whole text at once: what streaming the same text must end in. */
export function renderMarkdown(text: string): string {
  const cuts = [0, ...findBlockStarts(text), text.length];
  const box = document.createElement("div");
  for (let i = 0; i + 1 < cuts.length; i++) {
    const source = text.slice(cuts[i], cuts[i + 1]);
    if (source.trim() !== "") new BlockView(newBlockElement(box)).update(source).finish();
  }
  return box.innerHTML;
}

function newBlockElement(container: HTMLElement): HTMLElement {
  const element = container.ownerDocument.createElement("div");
  element.className = BLOCK_CLASS;
  container.append(element);
  return element;
}

let prepared = false;

/**
 * Renders a sample once, off screen, when the page is next idle. Each widget loads this module
 * anew (anywidget imports it from a new `blob:` URL per widget), so without this the first token
 * of every widget would wait while the sanitiser is built and configured and the rendering code
 * is compiled: 5–10 ms on a busy machine, measured. A view calls it when it is made, well before
 * its run's first token.
 */
export function prepareRendering(): void {
  if (prepared) return;
  prepared = true;
  const render = (): void => {
    const sample = new StreamingMarkdown(document.createElement("div"));
    sample.update("A *first* answer with `code`, a [link](https://example.org) and **more**.");
    sample.finish();
  };
  if (typeof requestIdleCallback === "function") requestIdleCallback(render, { timeout: 500 });
  else setTimeout(render, 0);
}

/** How much new text a streaming update renders at most, when it is given a budget. */
export const UPDATE_BUDGET = 8 * 1024;

/**
 * Renders a growing text into `container`, re-rendering only the open last block. With a budget,
 * one update renders at most that much new text (what arrives at once when a long run is replayed
 * or restored); `update` then returns false, and later updates go on from there.
 */
export class StreamingMarkdown {
  private source = "";
  /** Offset where the open block starts; everything before it is rendered for good. */
  private done = 0;
  private scanner = new BlockScanner();
  private tail: BlockView | null = null;

  constructor(
    private readonly container: HTMLElement,
    private readonly budget = Number.POSITIVE_INFINITY,
  ) {}

  /** Length of what the browser lays out again when the open last block changes. */
  get openLength(): number {
    return this.tail?.changingLength ?? 0;
  }

  /** Shows `text`, or as much of it as the budget allows; true once all of it is shown. */
  update(text: string): boolean {
    if (!text.startsWith(this.source)) this.reset();
    const shown = text.length - this.source.length > this.budget ? text.slice(0, this.source.length + this.budget) : text;
    this.source = shown;
    for (const start of this.scanner.scan(shown)) {
      this.completeBlock(shown.slice(this.done, start));
      this.done = start;
    }
    this.renderTail(shown.slice(this.done));
    return shown.length === text.length;
  }

  /** The text is complete: its last paragraph is laid out as one from now on. */
  finish(): void {
    this.tail?.finish();
  }

  reset(): void {
    this.container.replaceChildren();
    this.source = "";
    this.done = 0;
    this.scanner = new BlockScanner();
    this.tail = null;
  }

  private completeBlock(source: string): void {
    (this.tail ?? new BlockView(newBlockElement(this.container))).update(source).finish();
    this.tail = null;
  }

  private renderTail(source: string): void {
    if (source.trim() === "") {
      this.tail?.element.remove();
      this.tail = null;
      return;
    }
    this.tail ??= new BlockView(newBlockElement(this.container));
    this.tail.update(source);
  }
}

// --- one block, and long paragraphs in pieces -------------------------------------------------------

/** A finished paragraph in pieces up to this long becomes one paragraph; a longer one stays in pieces. */
export const JOIN_LIMIT = 16 * 1024;

/**
 * Renders one block as it grows. A block that is a plain paragraph of `PIECE` characters or more is
 * shown as pieces (see `Pieces`), each a block of its own until `finish()`; anything else is
 * rendered whole, as marked renders it.
 */
class BlockView {
  private source = "";
  /** Start of the line being written, and how far it has been searched for its newline. */
  private lineStart = 0;
  private searched = 0;
  /** Every complete line so far reads as paragraph text (false for good once one does not). */
  private plain = true;
  /** Start of the first blank line: the paragraph ends before it (-1: none yet). */
  private blank = -1;
  private pieces: Pieces | null = new Pieces();

  private shown: "none" | "whole" | "pieces" = "none";
  private wholeSource = "";
  private paragraph: HTMLElement | null = null;
  /** One span per piece shown, the last one open; empty once the paragraph is one again. */
  private spans: HTMLElement[] = [];
  private piecesShown = 0;
  private lastText: string | null = null;
  private paragraphLength = 0;
  /** The newline marked writes after `</p>`; what follows the paragraph comes after it. */
  private afterParagraph: Text | null = null;
  private rest: string | null = null;
  private finished = false;

  constructor(readonly element: HTMLElement) {}

  /** Length of what the browser lays out again when this block changes. */
  get changingLength(): number {
    if (this.shown !== "pieces" || this.spans.length === 0 || !this.pieces) return this.source.length;
    return this.source.length - this.pieces.lastStart;
  }

  update(source: string): this {
    if (!source.startsWith(this.source)) this.restart();
    else if (this.finished && source !== this.source) this.reopen();
    // marked turns \r\n into \n before it reads blocks; the pieces would not: render such text whole.
    if (source.indexOf("\r", this.source.length) >= 0) this.plain = false;
    this.source = source;
    this.readLines(source);
    const paragraph = this.paragraphText(source);
    if (paragraph !== null && this.pieces) {
      this.pieces.advance(paragraph);
      if (this.pieces.starts.length > 0) {
        this.showPieces(paragraph, source);
        return this;
      }
    }
    this.showWhole(source);
    return this;
  }

  /** No more text: a paragraph shown in pieces becomes one, as marked renders it (see `JOIN_LIMIT`). */
  finish(): void {
    this.finished = true;
    this.joinPieces();
  }

  private restart(): void {
    this.source = "";
    this.lineStart = 0;
    this.searched = 0;
    this.plain = true;
    this.blank = -1;
    this.pieces = new Pieces();
    this.shown = "none";
    this.spans = [];
    this.finished = false;
    this.element.replaceChildren();
  }

  /** More text after `finish()`: show the paragraph in pieces again (built anew). */
  private reopen(): void {
    this.finished = false;
    if (this.shown === "pieces") this.shown = "none";
  }

  /** Classifies the lines completed since the last update, up to the paragraph's end. */
  private readLines(source: string): void {
    while (this.plain && this.blank < 0) {
      const nl = source.indexOf("\n", this.searched);
      if (nl < 0) {
        this.searched = source.length;
        break;
      }
      const line = source.slice(this.lineStart, nl);
      if (/^[ \t]*$/.test(line)) {
        if (this.lineStart === 0) this.plain = false;
        else this.blank = this.lineStart;
      } else if (!isParagraphLine(line, this.lineStart === 0)) {
        this.plain = false;
      }
      this.lineStart = nl + 1;
      this.searched = nl + 1;
    }
    if (!this.plain) this.pieces = null;
  }

  /** The paragraph's text as marked passes it to the inline lexer; null if the block is not one now. */
  private paragraphText(source: string): string | null {
    if (!this.plain) return null;
    if (this.blank >= 0) return source.slice(0, this.blank - 1);
    const line = source.slice(this.lineStart);
    if (line === "") return this.lineStart > 0 ? source.slice(0, this.lineStart - 1) : null;
    return isParagraphLine(line, this.lineStart === 0) ? source : null;
  }

  private showWhole(source: string): void {
    if (this.shown === "whole" && source === this.wholeSource) return;
    morph(this.element, renderBlock(source));
    this.shown = "whole";
    this.spans = [];
    this.wholeSource = source;
  }

  private showPieces(paragraph: string, source: string): void {
    const pieces = this.pieces as Pieces;
    const doc = this.element.ownerDocument;
    if (this.shown !== "pieces" || !this.paragraph || !this.afterParagraph) {
      this.paragraph = doc.createElement("p");
      this.paragraph.className = PIECES_CLASS;
      this.afterParagraph = doc.createTextNode("\n");
      this.element.replaceChildren(this.paragraph, this.afterParagraph);
      this.spans = [];
      this.piecesShown = 0;
      this.lastText = null;
      this.rest = null;
      this.shown = "pieces";
    }
    const text = paragraph.slice(pieces.lastStart);
    this.paragraphLength = paragraph.length;
    if (this.piecesShown < pieces.html.length || text !== this.lastText) {
      // The open piece's span becomes the first piece frozen since the last update (its text
      // mostly only grows), then one span per piece, and a new open one.
      for (; this.piecesShown < pieces.html.length; this.piecesShown++) {
        morph(this.span(this.piecesShown), pieces.html[this.piecesShown] as string);
      }
      morph(this.span(this.piecesShown), renderInline(lexInline(text)));
      this.lastText = text;
    }
    // After a blank line, a block the blank line did not end (a list, indented code): render it whole.
    const rest = this.blank >= 0 ? source.slice(this.blank) : "";
    if (rest !== this.rest) {
      while (this.afterParagraph.nextSibling) this.afterParagraph.nextSibling.remove();
      if (rest.trim() !== "") {
        const box = doc.createElement("div");
        box.innerHTML = renderBlock(rest);
        this.element.append(...box.childNodes);
      }
      this.rest = rest;
    }
    // A blank line ended the paragraph: it will not change again.
    if (this.finished || this.blank >= 0) this.joinPieces();
  }

  /** The span of piece `index`, made (at the end) when there is none yet. */
  private span(index: number): HTMLElement {
    let span = this.spans[index];
    if (!span) {
      span = this.element.ownerDocument.createElement("span");
      span.className = PIECE_CLASS;
      (this.paragraph as HTMLElement).append(span);
      this.spans.push(span);
    }
    return span;
  }

  /**
   * The pieces' DOM in the paragraph itself, without their spans; adjacent text joined into one
   * node, as the parser builds it from the paragraph's HTML.
   */
  private joinPieces(): void {
    const paragraph = this.paragraph;
    if (this.shown !== "pieces" || !paragraph || this.spans.length === 0) return;
    if (this.paragraphLength > JOIN_LIMIT) return;
    const nodes: ChildNode[] = [];
    for (const span of this.spans) nodes.push(...span.childNodes);
    paragraph.replaceChildren(...nodes);
    paragraph.removeAttribute("class");
    paragraph.normalize();
    this.spans = [];
  }
}
