// Files and documents across formats: a chat-completions `file` part (and a Responses `input_file`, which becomes
// one), Messages `document` blocks, Converse `document` blocks and generateContent inline data. What a provider cannot
// take is refused with a 400 naming the part, never dropped.
import { invalidRequest, type LlmError } from "../errors.js";
import type { ConverseBlockDocument } from "../formats/converse.js";
import type { MessagesBlock } from "../formats/messages.js";
import { isObject, str } from "../json.js";
import { parseDataUrl } from "./common.js";

/** A chat `file` part read: its bytes (base64) with their media type, or a provider-side file id. */
export type ChatFile =
  | { readonly data: string; readonly mediaType: string; readonly filename: string | undefined }
  | { readonly fileId: string; readonly filename: string | undefined };

/** `{type: "file", file: {file_data: "data:<mime>;base64,...", filename?, file_id?}}` */
export function readChatFile(part: Record<string, unknown>, where: string): ChatFile | LlmError {
  const f = isObject(part.file) ? part.file : {};
  const filename = str(f.filename);
  const data = str(f.file_data);
  if (data !== undefined) {
    const d = parseDataUrl(data);
    if (d === undefined) return invalidRequest(`${where}: file.file_data must be a base64 data URL`);
    return { data: d.data, mediaType: d.mediaType, filename };
  }
  const id = str(f.file_id);
  if (id !== undefined) return { fileId: id, filename };
  return invalidRequest(`${where}: a file part needs file.file_data or file.file_id`);
}

const CONVERSE_FORMATS: Readonly<Record<string, string>> = {
  "application/pdf": "pdf",
  "text/csv": "csv",
  "application/msword": "doc",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
  "application/vnd.ms-excel": "xls",
  "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
  "text/html": "html",
  "text/plain": "txt",
  "text/markdown": "md",
};
const CONVERSE_EXTENSIONS = new Set(Object.values(CONVERSE_FORMATS));

/** The Converse document format of a media type (or, failing that, of the file name's extension). */
export function converseDocumentFormat(mediaType: string, filename: string | undefined): string | undefined {
  const byType = CONVERSE_FORMATS[mediaType.toLowerCase().split(";")[0]?.trim() ?? ""];
  if (byType !== undefined) return byType;
  const ext = filename?.toLowerCase().match(/\.([a-z]+)$/)?.[1];
  return ext !== undefined && CONVERSE_EXTENSIONS.has(ext) ? ext : undefined;
}

/**
 * Converse document names allow letters, digits, single spaces, hyphens, parentheses and square brackets, and must
 * be unique within a request: the file name without its extension, other characters replaced.
 */
export function converseDocumentName(filename: string | undefined, index: number, used: Set<string>): string {
  const base = (filename ?? "")
    .replace(/\.[A-Za-z0-9]+$/, "")
    .replace(/[^A-Za-z0-9\-()[\] ]+/g, " ")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, 200);
  let name = base === "" ? `document ${index + 1}` : base;
  for (let n = 2; used.has(name); n++) name = `${base === "" ? "document" : base} (${n})`;
  used.add(name);
  return name;
}

/** A file as a Converse document block, or a 400 naming the part when Converse cannot take it. */
export function converseDocument(
  file: ChatFile,
  where: string,
  index: number,
  used: Set<string>,
): ConverseBlockDocument | LlmError {
  if ("fileId" in file)
    return invalidRequest(`${where}: this provider takes files as base64 data (file.file_data), not file ids`);
  const format = converseDocumentFormat(file.mediaType, file.filename);
  if (format === undefined)
    return invalidRequest(
      `${where}: this provider takes documents of types pdf, csv, doc, docx, xls, xlsx, html, txt and md, not ${file.mediaType}`,
    );
  return { document: { format, name: converseDocumentName(file.filename, index, used), source: { bytes: file.data } } };
}

/** A file as a Messages document: a PDF as base64, plain text as text; other types and file ids are refused. */
export function messagesDocument(
  file: ChatFile,
  where: string,
): Extract<MessagesBlock, { type: "document" }> | LlmError {
  if ("fileId" in file)
    return invalidRequest(`${where}: this provider takes files as base64 data (file.file_data), not file ids`);
  const type = file.mediaType.toLowerCase().split(";")[0]?.trim();
  const title = file.filename !== undefined ? { title: file.filename } : {};
  if (type === "application/pdf")
    return { type: "document", source: { type: "base64", media_type: "application/pdf", data: file.data }, ...title };
  if (type === "text/plain")
    return {
      type: "document",
      source: { type: "text", media_type: "text/plain", data: Buffer.from(file.data, "base64").toString("utf8") },
      ...title,
    };
  return invalidRequest(`${where}: this provider takes PDF and plain text documents, not ${file.mediaType}`);
}
