/**
 * A tool's pictures as a person sees them: each once, in its card, at a size that leaves the card
 * readable, with its file chip (name, size, download); and the card's output without the
 * placeholders that tell the model where a picture was (`[image: figure-1.png]`).
 */
import { valuesOf, type Attachment, type Keyed, type ToolCard } from "../state";
import { h } from "./dom";
import { formatBytes } from "./format";

/**
 * Tools whose pictures are a notebook cell's outputs, drawn in the notebook under that cell: the
 * card shows a thumbnail of each, not the picture a second time. An inserted cell has pictures
 * only when the same call ran it.
 */
const PICTURES_IN_NOTEBOOK = new Set(["run_cell", "insert_cell"]);

/** A line that only marks where a picture was, e.g. `[image: figure-1.png]`. */
const PLACEHOLDER = /^\[image: ([^\]\n]+)\]$/;

/**
 * The name a person reads for one of the card's files. A file a tool makes is named after its call
 * (and the cell it ran) so that it is unique in the session; on the call's own card that prefix
 * says nothing.
 */
export function shownFileName(name: string, card: ToolCard): string {
  let shown = name.startsWith(`${card.toolCallId}-`) ? name.slice(card.toolCallId.length + 1) : name;
  // An inserted cell's id is known from its edit, not from the call's arguments.
  const cellIds = [cellOf(card.argsText), ...card.edits.map((edit) => edit.cellId)];
  const cellId = cellIds.find((id) => id && shown.startsWith(`${id}-`));
  if (cellId) shown = shown.slice(cellId.length + 1);
  return shown || name;
}

function cellOf(argsText: string): string | undefined {
  try {
    const args: unknown = JSON.parse(argsText);
    const cell = typeof args === "object" && args !== null ? (args as Record<string, unknown>)["cell_id"] : undefined;
    return typeof cell === "string" && cell !== "" ? cell : undefined;
  } catch {
    return undefined;
  }
}

/** The output without a line that only marks where one of the card's pictures was. */
export function withoutPlaceholders(output: string, card: ToolCard): string {
  if (card.images.length === 0) return output;
  const names = card.images.map((path) => baseName(path)).filter(Boolean);
  // A picture sent inline (the kernel's own runs) has no name: it answers for one placeholder.
  let unnamed = card.images.length - names.length;
  const kept = output.split("\n").filter((line) => {
    const marked = PLACEHOLDER.exec(line.trim())?.[1];
    if (marked === undefined) return true;
    if (names.some((name) => name === marked || name.endsWith(`-${marked}`))) return false;
    return unnamed-- <= 0;
  });
  return kept.join("\n").replace(/^\n+|\s+$/g, "");
}

function baseName(path: string): string {
  return path.startsWith("data:") ? "" : (path.split("/").pop() ?? "");
}

/** The attachment each picture of the card is (by its path), where the run announced it. */
function attachmentOf(path: string, attachments: Keyed<Attachment>): Attachment | undefined {
  return valuesOf(attachments).find((a) => a.virtualPath === path);
}

/** What the card's pictures look like, as one string: the same string, the same pictures. */
export function figuresKey(card: ToolCard, attachments: Keyed<Attachment>): string {
  return card.images
    .map((path) => {
      const attachment = attachmentOf(path, attachments);
      return `${path}\u0000${attachment?.fileName ?? ""}\u0000${attachment?.fileSize ?? ""}`;
    })
    .join("\u0001");
}

/** The card's pictures: each with its chip; a thumbnail where the notebook shows the picture. */
export function figureViews(
  card: ToolCard,
  attachments: Keyed<Attachment>,
  resolveUrl: (path: string) => string | null,
): HTMLElement[] {
  const thumbnail = PICTURES_IN_NOTEBOOK.has(card.toolName);
  return card.images.flatMap((path, index) => {
    const url = resolveUrl(path);
    if (!url) return [];
    const attachment = attachmentOf(path, attachments);
    const name = shownFileName(attachment?.fileName ?? baseName(path), card) || `figure ${index + 1}`;
    const image = h("img", { className: "neta-tool-image", attrs: { src: url, alt: name } });
    const picture = h("a", { className: "neta-figure-link", attrs: { href: url, target: "_blank", rel: "noopener", title: "Open the picture" } }, [image]);
    const className = thumbnail ? "neta-figure neta-figure-thumbnail" : "neta-figure";
    const caption = h("figcaption", {}, [fileChip(name, url, attachment?.fileSize)]);
    return [h("figure", { className, testid: "neta-figure" }, [picture, caption])];
  });
}

/** A file's name, size and download link, as one small chip. */
export function fileChip(name: string, url: string, size?: number): HTMLElement {
  const chip = h("a", {
    className: "neta-file-chip",
    testid: "neta-file-chip",
    attrs: { href: url, download: name, target: "_blank", rel: "noopener" },
  }, [h("span", { className: "neta-file-chip-name", text: name })]);
  if (size !== undefined) chip.append(h("span", { className: "neta-file-chip-size", text: formatBytes(size) }));
  return chip;
}
