/** Long paragraphs are rendered in pieces: same result as marked, bounded work per update. */
import { Lexer } from "marked";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  JOIN_LIMIT,
  PIECE,
  StreamingMarkdown,
  findBlockStarts,
  isParagraphLine,
  pieceStarts,
  renderBlock,
  renderMarkdown,
} from "../src/markdown";

/** Small deterministic PRNG so a failure can be replayed. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

function element(html: string): HTMLElement {
  const div = document.createElement("div");
  div.innerHTML = html;
  return div;
}

function normalised(html: string): string {
  return element(html).innerHTML;
}

/** What marked makes of the text block by block, without pieces. */
function wholeBlocks(text: string): HTMLElement {
  const cuts = [0, ...findBlockStarts(text), text.length];
  const html: string[] = [];
  for (let i = 0; i + 1 < cuts.length; i++) {
    const source = text.slice(cuts[i], cuts[i + 1]);
    if (source.trim() !== "") html.push(`<div class="neta-md-block">${renderBlock(source)}</div>`);
  }
  return element(html.join(""));
}

/** Inline formatting, in document order: what must look the same however the text was cut. */
function formatting(root: HTMLElement): string[] {
  return [...root.querySelectorAll("em, strong, code, del, a, img, br, b, i, span, h1, h2, table, li")]
    .filter((e) => e.tagName === "IMG" || e.tagName === "BR" || (e.textContent ?? "").trim() !== "")
    .map((e) => `${e.tagName}|${e.textContent}|${e.getAttribute("href") ?? e.getAttribute("src") ?? ""}`);
}

function stream(text: string, random: () => number, maxChunk: number): HTMLElement {
  const container = document.createElement("div");
  const markdown = new StreamingMarkdown(container);
  let at = 0;
  while (at < text.length) {
    at = Math.min(text.length, at + 1 + Math.floor(random() * maxChunk));
    markdown.update(text.slice(0, at));
  }
  markdown.finish();
  return container;
}

/** Inline constructs that close where they open. */
const CLOSED = [
  "**bold words**",
  "*em*",
  "_em_",
  "***both***",
  "__strong__",
  "~~struck~~",
  "`code`",
  "`` a`b ``",
  "[a link](https://example.org/a_(b))",
  "[a [nested] link](https://example.org)",
  "![an image](https://example.org/x.png)",
  "<https://example.org/auto>",
  "www.example.com",
  "someone@example.org",
  "snake_case_name",
  "\\*escaped\\*",
  "&amp; &copy;",
  "a * b",
  "x <= y",
  "[1]",
  "hard  \nbreak",
  "soft\nbreak",
  "«*quoted*»",
  "é*ü*ö",
  "x~~y~~z",
];
/** Constructs that leave something open, for a while or for good. */
const OPEN = ["2*3", "~5", "`", "*", "_x", "[", "](", "<b>", "</b>", "<em>x", "<span title=\"a b\">", "</span>", "*a **b*", "`a``b`"];
const HTML = ["<b>bold</b>", "<span>span</span>", "<kbd>Ctrl</kbd>", "<sub>2</sub>", "<br>"];

function paragraph(random: () => number, words: number, rare: number, atoms: readonly string[]): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(random() < rare ? pick(random, atoms) : `w${i}`);
  return out.join(" ");
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("long paragraphs in pieces", () => {
  it("give exactly the HTML marked makes of the whole paragraph", () => {
    let cuts = 0;
    for (let seed = 1; seed <= 24; seed++) {
      const random = prng(seed);
      const text = paragraph(random, 1500, [0.01, 0.05, 0.15][seed % 3] as number, CLOSED);
      cuts += pieceStarts(text).length;
      expect(element(renderMarkdown(text)).innerHTML, `seed ${seed}`).toBe(wholeBlocks(text).innerHTML);
    }
    // Pieces were actually made (about one per PIECE characters of these ~10 KB paragraphs).
    expect(cuts).toBeGreaterThan(24 * 3);
  }, 60_000);

  it("give the same text and formatting as the whole paragraph when something stays open, or with raw HTML", () => {
    for (let seed = 1; seed <= 30; seed++) {
      const random = prng(seed);
      const atoms = [...CLOSED, ...OPEN, ...HTML];
      const text = paragraph(random, 1500, [0.005, 0.02, 0.1][seed % 3] as number, atoms);
      const once = element(renderMarkdown(text));
      const whole = wholeBlocks(text);
      expect(once.textContent, `seed ${seed}`).toBe(whole.textContent);
      expect(formatting(once), `seed ${seed}`).toEqual(formatting(whole));
    }
  }, 60_000);

  it("end in exactly renderMarkdown(text), streamed in any chunk sizes", () => {
    for (let seed = 1; seed <= 8; seed++) {
      const random = prng(seed);
      const text = paragraph(random, 700, 0.04, [...CLOSED, ...OPEN, ...HTML]);
      const once = normalised(renderMarkdown(text));
      const maxChunk = [20, 60, 300, 3000][seed % 4] as number;
      expect(stream(text, random, maxChunk).innerHTML, `seed ${seed}`).toBe(once);
    }
  }, 60_000);

  it("are blocks of their own while the paragraph is written, and one paragraph again once it ends", () => {
    const text = paragraph(prng(21), 2_000, 0.05, CLOSED);
    expect(text.length).toBeLessThan(JOIN_LIMIT);
    const container = document.createElement("div");
    const markdown = new StreamingMarkdown(container);
    const random = prng(22);
    for (let at = 0; at < text.length; ) {
      at = Math.min(text.length, at + 1 + Math.floor(random() * 300));
      markdown.update(text.slice(0, at));
      const starts = pieceStarts(text.slice(0, at));
      // One block per piece, the open one last; the text is all there.
      expect(container.querySelectorAll("p.neta-md-pieces > span.neta-md-piece")).toHaveLength(starts.length ? starts.length + 1 : 0);
      expect(container.textContent?.trim()).toBe(element(renderBlock(text.slice(0, at))).textContent?.trim());
    }
    expect(markdown.openLength).toBeLessThan(2 * PIECE);
    markdown.finish();
    expect(container.innerHTML).toBe(wholeBlocks(text).innerHTML);
    // More text after finish() (a segment that goes on): pieces again, and joined again at the end.
    const more = `${text} ${paragraph(prng(23), 300, 0.05, CLOSED)}`;
    markdown.update(more);
    expect(container.querySelector(".neta-md-pieces")).not.toBeNull();
    markdown.finish();
    expect(container.innerHTML).toBe(wholeBlocks(more).innerHTML);
    // A blank line ends the paragraph too.
    markdown.update(`${more}\n\n- a list`);
    expect(container.querySelector(".neta-md-pieces")).toBeNull();
  });

  it("stay blocks of their own past JOIN_LIMIT, with the text and formatting marked gives", () => {
    const text = paragraph(prng(24), 4_000, 0.05, CLOSED);
    expect(text.length).toBeGreaterThan(JOIN_LIMIT);
    const once = element(renderMarkdown(text));
    expect(once.querySelectorAll("p.neta-md-pieces > span.neta-md-piece")).toHaveLength(pieceStarts(text).length + 1);
    expect(once.textContent).toBe(wholeBlocks(text).textContent);
    // The same formatting once the pieces' own spans are unwrapped.
    const unwrapped = element(once.innerHTML);
    for (const span of unwrapped.querySelectorAll("span.neta-md-piece")) span.replaceWith(...span.childNodes);
    expect(formatting(unwrapped)).toEqual(formatting(wholeBlocks(text)));
    expect(stream(text, prng(25), 200).innerHTML).toBe(once.innerHTML);
  });

  it("fall back to rendering the block whole when a line shows it is not a plain paragraph", () => {
    const long = paragraph(prng(3), 900, 0.05, CLOSED);
    expect(pieceStarts(long).length).toBeGreaterThan(1);
    const endings = [
      "",
      "\n===",
      "\n---",
      "\n- item\n- item two",
      "\n1. one",
      "\n2. not a list here",
      "\n# heading",
      "\n> quoted",
      "\n```\ncode\n```",
      "\n| a | b |\n|---|---|\n| 1 | 2 |",
      "\n*emphasis* on a new line",
      "\n    lazy continuation",
      "\n\n- a list after a blank line",
      "\n\n    indented code after a blank line",
      "\n\nNext paragraph.\n\nAnd one more.",
      "\r\nwith a carriage return",
    ];
    endings.forEach((ending, i) => {
      const text = long + ending;
      const once = normalised(renderMarkdown(text));
      const whole = wholeBlocks(text);
      expect(element(once).textContent, JSON.stringify(ending)).toBe(whole.textContent);
      expect(formatting(element(once)), JSON.stringify(ending)).toEqual(formatting(whole));
      const random = prng(100 + i);
      expect(stream(text, random, [40, 200, 700][i % 3] as number).innerHTML, JSON.stringify(ending)).toBe(once);
    });
    expect(element(renderMarkdown(`${long}\n===`)).querySelector("h1")?.textContent).toBe(
      element(renderBlock(long)).querySelector("p")?.textContent,
    );
    expect(element(renderMarkdown(`${long}\n| a | b |\n|---|---|`)).querySelector("table")).not.toBeNull();
  }, 60_000);

  it("still remove scripts, event handlers and javascript: links, in every piece", () => {
    const bad = [
      '<img src="x" onerror="window.pwned = 1">',
      "[click](javascript:window.pwned=1)",
      '<a href="https://example.org" onclick="x()">ok</a>',
      '<b onmouseover="window.pwned = 1">bold</b>',
    ];
    const random = prng(11);
    const parts: string[] = [];
    for (let i = 0; i < 2500; i++) parts.push(i % 97 === 50 ? pick(random, bad) : `w${i}`);
    // Elements that are not inline stop the cutting; they are removed all the same.
    parts.push("<script>window.pwned = 1</script> <iframe src='https://evil'></iframe> <svg><script>1</script></svg> end");
    const text = parts.join(" ");
    expect(pieceStarts(text).length).toBeGreaterThan(4);
    const container = stream(text, random, 200);
    const html = container.innerHTML.toLowerCase();
    expect(html).not.toContain("<script");
    expect(html).not.toContain("onerror");
    expect(html).not.toContain("onclick");
    expect(html).not.toContain("onmouseover");
    expect(html).not.toContain("javascript:");
    expect(html).not.toContain("<iframe");
    // The image is held back (its host is not allowed): a placeholder stands in for it.
    expect(container.querySelectorAll("img")).toHaveLength(0);
    expect(container.querySelectorAll(".neta-image-placeholder").length).toBeGreaterThan(0);
    expect(container.querySelectorAll("b").length).toBeGreaterThan(0);
    const links = [...container.querySelectorAll('a[href="https://example.org"]')];
    expect(links.length).toBeGreaterThan(0);
    for (const link of links) {
      expect(link.getAttribute("target")).toBe("_blank");
      expect(link.getAttribute("rel")).toBe("noopener noreferrer");
    }
  });

  it("parse a bounded amount of text per update, however long the paragraph grows", () => {
    const parsed: number[] = [];
    let chars = 0;
    const lexInline = Lexer.lexInline.bind(Lexer);
    const lex = Lexer.lex.bind(Lexer);
    vi.spyOn(Lexer, "lexInline").mockImplementation((src, options) => {
      chars += src.length;
      return lexInline(src, options);
    });
    vi.spyOn(Lexer, "lex").mockImplementation((src, options) => {
      chars += src.length;
      return lex(src, options);
    });
    // Plain words like the browser test's, then the same with some formatting.
    for (const rare of [0, 0.02]) {
      const text = paragraph(prng(5), 20_000, rare, CLOSED.filter((atom) => !atom.includes("\n")));
      const container = document.createElement("div");
      const markdown = new StreamingMarkdown(container);
      const random = prng(6);
      parsed.length = 0;
      for (let at = 0; at < text.length; ) {
        at = Math.min(text.length, at + 100 + Math.floor(random() * 200));
        chars = 0;
        markdown.update(text.slice(0, at));
        if (at > 4 * PIECE) parsed.push(chars);
      }
      expect(text.length).toBeGreaterThan(120_000);
      expect(Math.max(...parsed)).toBeLessThan(3 * PIECE);
      markdown.finish();
      expect(container.innerHTML).toBe(normalised(renderMarkdown(text)));
    }
  }, 60_000);

  it("with a budget, show at most that much more text per update, and all of it in the end", () => {
    const text = paragraph(prng(8), 12_000, 0.02, CLOSED);
    const container = document.createElement("div");
    const markdown = new StreamingMarkdown(container, 16 * 1024);
    let updates = 1;
    while (!markdown.update(text)) {
      updates++;
      expect((container.textContent ?? "").length).toBeLessThanOrEqual(updates * 16 * 1024);
    }
    expect(updates).toBeGreaterThan(text.length / (16 * 1024));
    markdown.finish();
    expect(container.innerHTML).toBe(normalised(renderMarkdown(text)));
    // A new text (not an extension) starts over, within the budget too.
    expect(markdown.update("Short **new** text.")).toBe(true);
    expect(container.innerHTML).toBe(normalised(renderMarkdown("Short **new** text.")));
  });
});

describe("isParagraphLine", () => {
  const LINES = [
    "plain words", "1", "1.", "1. ", "1. x", "2. x", "1) x", "12.5 apples", "123456789012. x",
    "*", "**", "***", "* x", "* * *", "*x*", "**x** y", "_", "__", "___", "_x_", "__x__",
    "`", "``", "```", "```py", "`x`", "``x``", "~", "~~", "~~~", "~x~", "~~x~~",
    "#", "# x", "#x", "#1 item", "######", "=", "==", "= x", "=x", "-", "- x", "--", "---", "-x", "+ x", "+1",
    "> q", ">q", "<b>x</b>", "<div>", "<!-- c -->", "| a |", "a | b", ": x", "[x]: /u", "[x](u)", "![i](u)",
    "   three spaces", "    four spaces", "\tx", "  \tx", "", "   ", "\\*x", "&amp;", "é", "日本語", "(a)", "\"q\"",
  ];

  it("says yes only where marked reads the line as text of the paragraph", () => {
    for (const line of LINES) {
      for (const ending of ["", "\n"]) {
        // A whole line of spaces is a blank line, which ends the paragraph before it is asked about.
        if (ending && /^[ \t]*$/.test(line)) continue;
        if (isParagraphLine(line, false)) {
          const source = `Some text\n${line}${ending}`;
          const tokens = Lexer.lex(source, { gfm: true }).filter((t) => t.type !== "space");
          expect(tokens.map((t) => t.type), JSON.stringify(source)).toEqual(["paragraph"]);
          expect(tokens[0]?.raw.replace(/\n+$/, ""), JSON.stringify(source)).toBe(source.replace(/\n+$/, ""));
        }
        if (isParagraphLine(line, true)) {
          const source = `${line}${ending}`;
          const tokens = Lexer.lex(source, { gfm: true }).filter((t) => t.type !== "space");
          expect(tokens.map((t) => t.type), JSON.stringify(source)).toEqual(["paragraph"]);
        }
      }
    }
  });

  it("says yes to ordinary prose lines", () => {
    for (const line of ["The answer is 42.", "**Note:** this", "`df` has", "1.5 times", "[link](u) text", "«quoted»", "日本語"]) {
      expect(isParagraphLine(line, false), line).toBe(true);
    }
    for (const line of ["- item", "1. first", "# Title", "===", "---", "| a |", "> quote", "```"]) {
      expect(isParagraphLine(line, false), line).toBe(false);
    }
  });
});
