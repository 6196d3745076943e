// The resource envelope shared by every kind Sluice reads (Kubernetes object shape).

export interface ObjectMeta {
  readonly name: string;
  readonly namespace?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly generation?: number;
  readonly uid?: string;
}

export interface Resource<K extends string = string, S = unknown> {
  readonly apiVersion: string;
  readonly kind: K;
  readonly metadata: ObjectMeta;
  readonly spec: S;
}

/** Where a resource came from, so every message can name its file and line. */
export interface SourceRef {
  readonly file: string;
  /** 1-based line of the document start. */
  readonly line: number;
  /** Line of a field path inside the document, 1-based; falls back to the document line. */
  readonly lineOf?: (path: readonly (string | number)[]) => number;
}

export const DEFAULT_NAMESPACE = "default";

export function namespaceOf(r: { readonly metadata: ObjectMeta }): string {
  return r.metadata.namespace ?? DEFAULT_NAMESPACE;
}

/** `Kind ns/name`, the way every message refers to a resource. */
export function describeResource(r: { readonly kind: string; readonly metadata: ObjectMeta }): string {
  return `${r.kind} ${namespaceOf(r)}/${r.metadata.name}`;
}

export function resourceKey(r: { readonly kind: string; readonly metadata: ObjectMeta }): string {
  return `${r.kind}/${namespaceOf(r)}/${r.metadata.name}`;
}
