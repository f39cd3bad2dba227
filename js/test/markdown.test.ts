import { describe, expect, it } from "vitest";
import { PIECE, StreamingMarkdown, findBlockStarts, renderBlock, renderMarkdown } from "../src/markdown";

const SAMPLES = [
  "Hello **world**.\n\nSecond paragraph with `code`.\n",
  [
    "# Missing values",
    "",
    "Column **b** has the most:",
    "",
    "| col | missing |",
    "|-----|---------|",
    "| a   | 0       |",
    "| b   | 12      |",
    "",
    "```python",
    "import pandas as pd",
    "",
    "",
    "def worst(df):",
    "    return df.isna().sum().idxmax()",
    "```",
    "",
    "1. first",
    "",
    "2. second",
    "   continued",
    "",
    "   indented paragraph of item 2",
    "",
    "- a",
    "- b",
    "",
    "> quoted",
    "",
    "~~~sql",
    "SELECT 1;",
    "",
    "~~~",
    "",
    "Done <b>bold</b> and a [link](https://example.org).",
  ].join("\n"),
  "Unclosed fence at the end:\n\n```json\n{\"a\": 1,\n\n\"b\": 2",
  "\n\n\nleading blank lines\n\n\n\ntrailing\n\n\n",
  "    indented code\n\n    more indented code\n\nafter",
  "````\n```\ninner fence stays code\n\n```\n````\n\nout",
];

/** Small deterministic PRNG so a failure can be replayed. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function normalised(html: string): string {
  const div = document.createElement("div");
  div.innerHTML = html;
  return div.innerHTML;
}

function stream(text: string, random: () => number, maxChunk: number): HTMLElement {
  const container = document.createElement("div");
  const markdown = new StreamingMarkdown(container);
  let at = 0;
  while (at < text.length) {
    at = Math.min(text.length, at + 1 + Math.floor(random() * maxChunk));
    markdown.update(text.slice(0, at));
  }
  return container;
}

describe("streaming markdown", () => {
  it.each(SAMPLES.map((text, i) => [i, text] as const))("sample %i gives the same HTML in any chunk sizes", (_, text) => {
    const once = normalised(renderMarkdown(text));
    for (let seed = 1; seed <= 10; seed++) {
      const random = prng(seed);
      const maxChunk = [1, 3, 8, 40, 500][seed % 5]!;
      expect(stream(text, random, maxChunk).innerHTML).toBe(once);
    }
  }, 30_000);

  it("renders texts with no paragraph of PIECE characters block by block, exactly as marked does", () => {
    for (const text of SAMPLES) {
      const cuts = [0, ...findBlockStarts(text), text.length];
      const blocks: string[] = [];
      for (let i = 0; i + 1 < cuts.length; i++) {
        const source = text.slice(cuts[i], cuts[i + 1]);
        if (source.trim() !== "") blocks.push(`<div class="neta-md-block">${renderBlock(source)}</div>`);
      }
      expect(text.length).toBeLessThan(PIECE);
      expect(normalised(renderMarkdown(text))).toBe(normalised(blocks.join("")));
    }
  });

  it("cuts only outside code fences, and only once the next line shows it starts a block", () => {
    const text = "a\n\n```\nx\n\ny\n```\n\nb\n";
    expect(findBlockStarts(text)).toEqual([3, 17]);
    expect(findBlockStarts(text, 3)).toEqual([17]);
    expect(findBlockStarts("a\n\n")).toEqual([]);
    expect(findBlockStarts("a\n\nb")).toEqual([3]);
    expect(findBlockStarts("a\n\nb\n")).toEqual([3]);
    // A line that may yet be a list item or indented (continuing the block) waits until it ends.
    for (const start of ["-", "- ", "1", "12.", " ", "\t", "*", "+"]) {
      expect(findBlockStarts(`a\n\n${start}`), JSON.stringify(start)).toEqual([]);
    }
    expect(findBlockStarts("a\n\n-x\n")).toEqual([3]);
    expect(findBlockStarts("a\n\n- x\n")).toEqual([]);
  });

  it("makes the paragraph being written a block of its own as soon as it begins", () => {
    const container = document.createElement("div");
    const markdown = new StreamingMarkdown(container);
    const words = Array.from({ length: 3_000 }, (_, i) => `w${i}`).join(" ");
    for (let at = 1; at <= words.length; at += 97) markdown.update(`First paragraph.\n\n${words.slice(0, at)}`);
    expect(container.children).toHaveLength(2);
    expect(container.children[1]?.querySelector(".neta-md-pieces")).not.toBeNull();
    expect(markdown.openLength).toBeLessThan(2 * PIECE);
  });

  it("keeps completed blocks and re-renders only the open one", () => {
    const container = document.createElement("div");
    const markdown = new StreamingMarkdown(container);
    markdown.update("First paragraph.\n\nSecond paragraph,\n");
    const first = container.children[0]!;
    const html = first.innerHTML;
    markdown.update("First paragraph.\n\nSecond paragraph,\nlonger now.\n\nThird\n");
    expect(container.children[0]).toBe(first);
    expect(first.innerHTML).toBe(html);
    expect(container.children).toHaveLength(3);
    expect(container.textContent).toContain("Second paragraph,\nlonger now.");
  });

  it("starts over when the text is replaced rather than extended", () => {
    const container = document.createElement("div");
    const markdown = new StreamingMarkdown(container);
    markdown.update("old text\n\nmore\n");
    markdown.update("new");
    expect(container.innerHTML).toBe(normalised(renderMarkdown("new")));
  });

  it("highlights python, json, bash and sql code", () => {
    const html = renderMarkdown("```python\ndef f():\n    return 'x'\n```\n\n```bash\necho $HOME\n```\n");
    expect(html).toContain('class="hljs language-python"');
    expect(html).toContain("hljs-keyword");
    expect(html).toContain("hljs-string");
    expect(renderMarkdown("```sql\nSELECT 1\n```")).toContain("hljs-keyword");
    expect(renderMarkdown('```json\n{"a": 1}\n```')).toContain("hljs-attr");
    expect(renderMarkdown("```cobol\n<b>x</b>\n```")).toContain("&lt;b&gt;");
    // Other names of the same languages, and names that are not languages at all.
    expect(renderMarkdown("```py3\nimport os\n```")).toContain('<span class="hljs-keyword">import</span>');
    expect(renderMarkdown("```Shell\necho $HOME\n```")).toContain("hljs-built_in");
    expect(renderMarkdown("```constructor\n<b>x</b>\n```")).toContain("&lt;b&gt;");
  });

  it("removes scripts, event handlers and javascript: links from model output", () => {
    const text = [
      "<script>window.pwned = 1</script>",
      "",
      '<img src="x" onerror="window.pwned = 1">',
      "",
      "[click](javascript:window.pwned=1) <iframe src='https://evil'></iframe>",
      "",
      "<svg><script>1</script></svg><a href=\"https://example.org\" onclick=\"x()\">ok</a>",
    ].join("\n");
    const container = stream(text, prng(7), 5);
    const html = container.innerHTML.toLowerCase();
    expect(html).not.toContain("<script");
    expect(html).not.toContain("onerror");
    expect(html).not.toContain("onclick");
    expect(html).not.toContain("javascript:");
    expect(html).not.toContain("<iframe");
    // The image is held back (its host is not allowed): a placeholder stands in for it.
    expect(container.querySelector("img")).toBeNull();
    expect(container.querySelector(".neta-image-placeholder")).not.toBeNull();
    const link = container.querySelector('a[href="https://example.org"]');
    expect(link?.getAttribute("target")).toBe("_blank");
    expect(link?.getAttribute("rel")).toBe("noopener noreferrer");
  });
});
