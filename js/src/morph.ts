/** Updating rendered HTML in place, so that the browser lays out only what changed. */

/** Replace the data of `node` from `offset` on by `data`, appending when it only grew. */
function setDataFrom(node: CharacterData, offset: number, data: string): void {
  const old = node.length - offset;
  const current = node.substringData(offset, old);
  if (data.length >= old && data.startsWith(current)) {
    if (data.length > old) node.appendData(data.slice(old));
  } else {
    node.replaceData(offset, old, data);
  }
}

/**
 * Make `target`'s content the DOM of `html`, changing as little as it can: nodes that stay keep
 * their identity, and text that only grew is appended to. The browser then lays out a growing
 * paragraph in time that depends on what changed, not on the paragraph's length.
 */
export function morph(target: HTMLElement, html: string): void {
  const source = target.ownerDocument.createElement(target.tagName);
  source.innerHTML = html;
  syncChildren(target, source);
}

function syncChildren(target: Node, source: Node): void {
  syncFrom(target, target.firstChild, source);
}

/** Make the children of `target` from `t` on those of `source` (which it takes). */
function syncFrom(target: Node, from: ChildNode | null, source: Node): void {
  let t = from;
  let s = source.firstChild;
  while (t && s && sameShell(t, s)) {
    if (t.nodeType === Node.ELEMENT_NODE) syncChildren(t, s);
    else if (t.nodeValue !== s.nodeValue) setData(t as CharacterData, s.nodeValue ?? "");
    t = t.nextSibling;
    s = s.nextSibling;
  }
  while (t) {
    const next: ChildNode | null = t.nextSibling;
    target.removeChild(t);
    t = next;
  }
  while (s) {
    const next: ChildNode | null = s.nextSibling;
    target.appendChild(s);
    s = next;
  }
}

/** Same kind of node, and for elements the same tag and attributes (children aside). */
function sameShell(a: Node, b: Node): boolean {
  if (a.nodeType !== b.nodeType) return false;
  if (a.nodeType !== Node.ELEMENT_NODE) return true;
  const x = a as Element;
  const y = b as Element;
  if (x.tagName !== y.tagName || x.attributes.length !== y.attributes.length) return false;
  for (const attr of Array.from(y.attributes)) {
    if (x.getAttributeNS(attr.namespaceURI, attr.localName) !== attr.value) return false;
  }
  return true;
}

function setData(node: CharacterData, data: string): void {
  setDataFrom(node, 0, data);
}
