/**
 * The anywidget entry (`export default { render }`).
 *
 * The widget's code, and the libraries it renders markdown with, are evaluated on the first
 * render, in a task of their own: JupyterLab evaluates this module and renders the first view in
 * one task, and building marked's and DOMPurify's tables there too made it a long one.
 */
import "./styles.css";
import type { WidgetModel } from "./widget";

export type { WidgetModel } from "./widget";

export interface RenderContext {
  readonly model: WidgetModel;
  readonly el: HTMLElement;
}

let loading: Promise<typeof import("./widget")> | null = null;

function load(): Promise<typeof import("./widget")> {
  loading ??= new Promise<void>((resolve) => setTimeout(resolve, 0)).then(() => import("./widget"));
  return loading;
}

async function render({ model, el }: RenderContext): Promise<() => void> {
  const { mount } = await load();
  return mount(model, el);
}

export default { render };
