/** Tiny DOM helpers: the view builds elements by hand, there is no framework. */

export interface ElementProps {
  readonly className?: string;
  readonly testid?: string;
  readonly text?: string;
  readonly attrs?: Readonly<Record<string, string>>;
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: ElementProps = {},
  children: readonly (Node | string)[] = [],
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (props.className) element.className = props.className;
  if (props.testid) element.dataset["testid"] = props.testid;
  if (props.text !== undefined) element.textContent = props.text;
  for (const [name, value] of Object.entries(props.attrs ?? {})) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

export function button(label: string, testid: string, className = "neta-button"): HTMLButtonElement {
  return h("button", { className, testid, text: label, attrs: { type: "button" } });
}

/** Show or hide; only when that changes, since setting `hidden` costs as much as changing it. */
export function setVisible(element: HTMLElement, visible: boolean): void {
  if (element.hidden === visible) element.hidden = !visible;
}

/** Set text only when it changed, so selection and layout are left alone otherwise. */
export function setText(element: HTMLElement, text: string): void {
  if (element.textContent !== text) element.textContent = text;
}

const grownText = new WeakMap<HTMLElement, string>();

/**
 * Set text that usually grows at its end (streamed reasoning): what was already there stays, only
 * the new end is appended, so a long text costs per update what arrived, not its whole length.
 */
export function setGrowingText(element: HTMLElement, text: string): void {
  const shown = grownText.get(element);
  const node = element.firstChild;
  if (shown !== undefined && node?.nodeType === Node.TEXT_NODE && node === element.lastChild && text.startsWith(shown)) {
    if (text.length > shown.length) (node as Text).appendData(text.slice(shown.length));
  } else if (shown !== text || element.childNodes.length !== (text ? 1 : 0)) {
    element.textContent = text;
  }
  grownText.set(element, text);
}

export function setData(element: HTMLElement, key: string, value: string | number): void {
  const text = String(value);
  if (element.dataset[key] !== text) element.dataset[key] = text;
}

/**
 * Keys typed into the widget must not reach JupyterLab's notebook shortcuts
 * (`a`, `b`, `dd`, … in command mode).
 */
export function isolateKeys(element: HTMLElement): void {
  element.setAttribute("data-lm-suppress-shortcuts", "true");
  element.addEventListener("keydown", (event) => event.stopPropagation());
}

/** A textarea that sends on Ctrl/Cmd+Enter. */
export function textarea(testid: string, placeholder: string, onSubmit: (event: KeyboardEvent) => void): HTMLTextAreaElement {
  const area = h("textarea", { className: "neta-textarea", testid, attrs: { rows: "2", placeholder } });
  isolateKeys(area);
  area.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      onSubmit(event);
    }
  });
  return area;
}
