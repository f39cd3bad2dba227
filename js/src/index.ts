/**
 * The anywidget entry (`export default { render }`).
 *
 * The widget's code, and the libraries it renders markdown with, are evaluated on the first
 * render, each in a task of its own: JupyterLab evaluates this module and renders the first view
 * in one task, and the libraries build their tables (marked's rules, DOMPurify's allow-lists) as
 * they are evaluated; all in that one task made it a long one.
 */
import "./styles.css";
import "./styles-workspace.css";
import type { WidgetModel } from "./widget";

export type { WidgetModel } from "./widget";

export interface RenderContext {
  readonly model: WidgetModel;
  readonly el: HTMLElement;
}

let loading: Promise<typeof import("./widget")> | null = null;

function nextTask(): Promise<void> {
  return new Promise<void>((resolve) => setTimeout(resolve, 0));
}

async function loadInTasks(): Promise<typeof import("./widget")> {
  for (const library of [() => import("marked"), () => import("dompurify"), () => import("highlight.js/lib/core")]) {
    await nextTask();
    await library();
  }
  await nextTask();
  return import("./widget");
}

function load(): Promise<typeof import("./widget")> {
  loading ??= loadInTasks();
  return loading;
}

async function render({ model, el }: RenderContext): Promise<() => void> {
  const { mount } = await load();
  return mount(model, el);
}

export default { render };
