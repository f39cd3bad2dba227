/**
 * Model output is hostile input: an answer may carry whatever HTML a prompt injection put there.
 * What markdown produces is kept, and nothing else: no `<style>` and no `style` attribute (which
 * could restyle, cover or stretch anything on the page), no forms, inputs or buttons, no frames,
 * embeds, SVG or MathML, no `id`, `name` or data attributes, and of classes only highlight.js's (so
 * no rendered element can match a selector of the widget or of JupyterLab).
 *
 * Nothing loads without the user: an image shows at once only from this server's attachment
 * download endpoint, as a `data:` or same-page `blob:` URL, or from a host the server's
 * configuration allows (`c.NetaApp.image_hosts`). Any other image becomes a placeholder that loads
 * it when clicked; an image URL can carry a secret to its host. Links open in a new tab, without
 * the opener or a referrer, and only to http(s) and mailto URLs.
 */
import DOMPurify, { type DOMPurify as Purifier } from "dompurify";

/** The elements markdown renders (and the inline HTML models commonly write). */
const TAGS = [
  "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "code", "ul", "ol", "li",
  "table", "thead", "tbody", "tr", "th", "td", "a", "img", "em", "strong", "del", "s", "b", "i", "u",
  "ins", "mark", "sub", "sup", "kbd", "samp", "var", "small", "q", "abbr", "cite", "dfn", "wbr", "span",
  "details", "summary",
];
const ATTRIBUTES = ["href", "src", "alt", "title", "align", "start", "class", "open"];
/** Elements that may keep a (highlight.js) class. */
const CLASSED = new Set(["CODE", "SPAN", "PRE"]);
/** highlight.js's classes: `hljs`, `hljs-keyword`, `language-python` and its sub-scopes (`function_`). */
const SAFE_CLASS = /^(hljs(-[\w-]+)?|language-[\w+#.-]+|[a-z]+_+)$/i;
const LINK = /^(https?:\/\/|mailto:)/i;

/** Set on an image the policy holds back; its placeholder replaces it after sanitising. */
const HELD = "data-neta-held";
/** The placeholder of an image that loads on a click. */
export const PLACEHOLDER_CLASS = "neta-image-placeholder";

export interface ImagePolicy {
  /** Path (on this page's origin) of the server's attachment download endpoint; null without one. */
  readonly attachmentPath: string | null;
  /** Hosts whose images load at once; `*.example.org` allows its subdomains. */
  readonly hosts: readonly string[];
}

let policy: ImagePolicy = { attachmentPath: null, hosts: [] };
/** Image URLs the user chose to load on this page. */
const loaded = new Set<string>();

export function setImagePolicy(next: ImagePolicy): void {
  policy = { attachmentPath: next.attachmentPath, hosts: next.hosts.map((h) => h.trim().toLowerCase()).filter(Boolean) };
}

function hostAllowed(host: string): boolean {
  const name = host.toLowerCase();
  return policy.hosts.some((allowed) =>
    allowed.startsWith("*.") ? name.endsWith(allowed.slice(1)) : name === allowed,
  );
}

/** Whether an image with this `src` may load without the user's click. */
export function imageLoadsAtOnce(src: string): boolean {
  const value = src.trim();
  if (/^data:image\//i.test(value) || loaded.has(value)) return true;
  let url: URL;
  try {
    url = new URL(value, document.baseURI);
  } catch {
    return false;
  }
  if (url.protocol === "blob:") return value.startsWith(`blob:${location.origin}/`);
  if (url.protocol !== "http:" && url.protocol !== "https:") return false;
  if (url.origin === location.origin && policy.attachmentPath !== null) return url.pathname === policy.attachmentPath;
  return hostAllowed(url.hostname);
}

let purifier: Purifier | null = null;

/** A DOMPurify of our own: its hooks must not change what any other code on the page sanitises. */
function strictPurifier(): Purifier {
  if (purifier) return purifier;
  const made = DOMPurify(window);
  // Set once: a config passed with each call would be parsed again for each (a piece of text each).
  made.setConfig({ ALLOWED_TAGS: TAGS, ALLOWED_ATTR: ATTRIBUTES, ALLOW_DATA_ATTR: false, ALLOW_ARIA_ATTR: false });
  made.addHook("uponSanitizeAttribute", (node, data) => {
    if (data.attrName !== "class") return;
    const kept = data.attrValue.split(/\s+/).filter((c) => SAFE_CLASS.test(c));
    if (kept.length === 0 || !CLASSED.has(node.nodeName)) data.keepAttr = false;
    else data.attrValue = kept.join(" ");
  });
  made.addHook("afterSanitizeAttributes", (node) => {
    if (node.nodeName === "A") fixLink(node);
    else if (node.nodeName === "IMG") holdImage(node);
  });
  purifier = made;
  return made;
}

function fixLink(link: Element): void {
  const href = link.getAttribute("href");
  if (href === null) return;
  if (!LINK.test(href.trim())) {
    link.removeAttribute("href");
    return;
  }
  link.setAttribute("target", "_blank");
  link.setAttribute("rel", "noopener noreferrer");
}

function holdImage(image: Element): void {
  const src = image.getAttribute("src");
  if (src === null) return;
  if (imageLoadsAtOnce(src)) {
    image.setAttribute("referrerpolicy", "no-referrer");
    return;
  }
  image.removeAttribute("src");
  image.setAttribute(HELD, src.trim());
}

/** `html` with only what markdown renders; held-back images replaced by their placeholders. */
export function sanitizeHtml(html: string): string {
  // Without a tag there is nothing to remove (marked escapes `<` in text): spare DOMPurify's parse.
  if (!html.includes("<")) return html;
  const clean = strictPurifier().sanitize(html);
  return clean.includes(HELD) ? withPlaceholders(clean) : clean;
}

function withPlaceholders(html: string): string {
  // A template's content is inert: nothing in it loads while it is parsed and edited.
  const template = document.createElement("template");
  template.innerHTML = html;
  for (const image of Array.from(template.content.querySelectorAll(`img[${HELD}]`))) {
    image.replaceWith(placeholder(image.getAttribute(HELD) ?? "", image.getAttribute("alt") ?? ""));
  }
  return template.innerHTML;
}

function hostOf(src: string): string {
  try {
    return new URL(src, document.baseURI).host || src;
  } catch {
    return src;
  }
}

function placeholder(src: string, alt: string): HTMLElement {
  const element = document.createElement("span");
  element.className = PLACEHOLDER_CLASS;
  element.setAttribute("role", "button");
  element.setAttribute("tabindex", "0");
  element.setAttribute("title", `Load ${src}`);
  element.dataset["src"] = src;
  element.dataset["alt"] = alt;
  element.textContent = `${alt || "Image"} (from ${hostOf(src)}: click to load)`;
  return element;
}

/** The image a placeholder stands for, as `sanitizeHtml` renders it once it may load. */
function loadedImage(src: string, alt: string): HTMLImageElement {
  const image = document.createElement("img");
  image.setAttribute("src", src);
  if (alt) image.setAttribute("alt", alt);
  image.setAttribute("referrerpolicy", "no-referrer");
  return image;
}

/** Placeholders under `root` load their image when clicked (or activated with Enter or Space). */
export function loadImagesOnClick(root: HTMLElement): void {
  const load = (event: Event): void => {
    if (event instanceof KeyboardEvent && event.key !== "Enter" && event.key !== " ") return;
    const target = event.target instanceof Element ? event.target.closest(`.${PLACEHOLDER_CLASS}`) : null;
    if (!(target instanceof HTMLElement) || !root.contains(target)) return;
    event.preventDefault();
    const src = target.dataset["src"] ?? "";
    loaded.add(src);
    target.replaceWith(loadedImage(src, target.dataset["alt"] ?? ""));
  };
  root.addEventListener("click", load);
  root.addEventListener("keydown", load);
}
