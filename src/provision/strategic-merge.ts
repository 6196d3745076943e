// Strategic merge patch, the subset GwParameters overlays need, with the merge keys Kubernetes declares
// (patchStrategy / patchMergeKey) for the fields of the kinds Sluice provisions (Deployment, DaemonSet, Service,
// ServiceAccount, PodDisruptionBudget, HorizontalPodAutoscaler). The API server's own strategic merge works on a
// stored object only, and the generated object is what is merged onto, before it is stored (or while the stored one
// holds an older render); so the merge is done here, and the result is checked by the API server (a dry-run
// server-side apply with strict field validation) before anything is written. Semantics follow
// k8s.io/apimachinery/pkg/util/strategicpatch:
//
// - scalars replace; `null` removes a field; maps merge key by key;
// - keyed lists merge item by item on their merge key (containers by `name`, container ports by `containerPort`,
//   volume mounts by `mountPath`, ...); other lists are replaced whole;
// - `$patch: replace` in a map replaces the map, as a list item replaces the list; `$patch: delete` in a map empties
//   it (as the API server does: `null` removes a field), as a list item removes the item with its key; `$patch: merge`
//   is the default;
// - a merged keyed list is ordered as the API server orders it: the patch's items in the patch's order (or in the
//   order `$setElementOrder/<field>` gives), the items only the object had in their order, the two interleaved so
//   that of two items the object had, the earlier one stays first, and a new item goes before an old one otherwise;
// - `$retainKeys: [...]` keeps only those keys of the map; `$deleteFromPrimitiveList/<field>: [...]` removes values
//   from a list of scalars.

import { joinPath } from "../api/problems.js";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonMap = { [k: string]: Json };

export interface MergeProblem {
  /** Path in the patch, e.g. `spec.template.spec.containers[0].$patch`. */
  readonly path: string;
  readonly message: string;
}

const CONTAINER_LISTS = new Set(["containers", "initContainers", "ephemeralContainers"]);

/** The merge key of a list field, given the field names on the way to it; undefined for an atomic list. */
export function mergeKey(path: readonly string[]): string | undefined {
  const field = path[path.length - 1];
  switch (field) {
    case "containers":
    case "initContainers":
    case "ephemeralContainers":
    case "volumes":
    case "env":
    case "imagePullSecrets":
    case "resourceClaims":
    case "schedulingGates":
    case "secrets":
      return "name";
    case "volumeMounts":
      return "mountPath";
    case "volumeDevices":
      return "devicePath";
    case "hostAliases":
      return "ip";
    case "topologySpreadConstraints":
      return "topologyKey";
    case "ports":
      // Container ports merge by containerPort, Service ports by port.
      return path.slice(0, -1).some((p) => CONTAINER_LISTS.has(p)) ? "containerPort" : "port";
    default:
      return undefined;
  }
}

function isMap(v: unknown): v is JsonMap {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function clone<T extends Json>(v: T): T {
  return structuredClone(v);
}

/**
 * A value taken whole (`$patch: replace`): its directives and null fields removed (a null there means absent, as when
 * the API server decodes it into its type).
 */
function stripDirectives(v: Json): Json {
  if (Array.isArray(v)) return v.filter((e) => !(isMap(e) && e["$patch"] !== undefined)).map(stripDirectives);
  if (!isMap(v)) return v;
  const out: JsonMap = {};
  for (const [k, x] of Object.entries(v)) if (!k.startsWith("$") && x !== null) out[k] = stripDirectives(x);
  return out;
}

/**
 * `patch` merged onto `original` (neither is changed). `fields` are the field names leading to both (the merge keys
 * depend on them); `at` is the patch's path for messages. Problems are collected, never thrown; on a problem the
 * offending part of the patch is skipped.
 */
export function strategicMerge(
  original: Json | undefined,
  patch: Json,
  problems: MergeProblem[],
  fields: readonly string[] = [],
  at: readonly (string | number)[] = [],
): Json | undefined {
  if (isMap(patch)) return mergeMap(isMap(original) ? original : undefined, patch, problems, fields, at);
  if (Array.isArray(patch))
    return mergeList(Array.isArray(original) ? original : undefined, patch, problems, fields, at);
  return patch;
}

function mergeMap(
  original: JsonMap | undefined,
  patch: JsonMap,
  problems: MergeProblem[],
  fields: readonly string[],
  at: readonly (string | number)[],
): Json | undefined {
  const directive = patch["$patch"];
  if (directive !== undefined) {
    if (directive === "replace") return stripDirectives(patch);
    if (directive === "delete") return {};
    if (directive !== "merge") {
      problems.push({
        path: joinPath([...at, "$patch"]),
        message: `unknown $patch directive ${JSON.stringify(directive)}: use merge, replace or delete`,
      });
      return original === undefined ? undefined : clone(original);
    }
  }
  let out: JsonMap = original === undefined ? {} : clone(original);
  const retain = patch["$retainKeys"];
  if (retain !== undefined) {
    if (!Array.isArray(retain) || !retain.every((k) => typeof k === "string"))
      problems.push({ path: joinPath([...at, "$retainKeys"]), message: "$retainKeys must be a list of field names" });
    else {
      const keep = new Set<string>(retain as string[]);
      out = Object.fromEntries(Object.entries(out).filter(([k]) => keep.has(k)));
    }
  }
  const orders = new Map<string, Json[]>();
  for (const [k, v] of Object.entries(patch)) {
    if (!k.startsWith("$setElementOrder/")) continue;
    if (Array.isArray(v)) orders.set(k.slice("$setElementOrder/".length), v);
    else problems.push({ path: joinPath([...at, k]), message: "must be a list of the items' merge keys, in order" });
  }
  for (const [k, v] of Object.entries(patch)) {
    if (k === "$patch" || k === "$retainKeys" || k.startsWith("$setElementOrder/")) continue;
    if (k.startsWith("$deleteFromPrimitiveList/")) {
      const field = k.slice("$deleteFromPrimitiveList/".length);
      const list = out[field];
      if (!Array.isArray(v)) {
        problems.push({ path: joinPath([...at, k]), message: "must be a list of the values to remove" });
        continue;
      }
      if (Array.isArray(list)) out[field] = list.filter((x) => !v.some((d) => d === x));
      continue;
    }
    if (k.startsWith("$")) {
      problems.push({
        path: joinPath([...at, k]),
        message: `unknown directive ${k}: use $patch, $retainKeys, $deleteFromPrimitiveList/<field> or $setElementOrder/<field>`,
      });
      continue;
    }
    if (v === null) {
      delete out[k];
      continue;
    }
    const before = out[k];
    if (
      (isMap(v) && before !== undefined && !isMap(before)) ||
      (Array.isArray(v) && before !== undefined && !Array.isArray(before))
    ) {
      problems.push({
        path: joinPath([...at, k]),
        message: `is ${Array.isArray(v) ? "a list" : "an object"} in the overlay but ${Array.isArray(before) ? "a list" : typeof before} in the generated object`,
      });
      continue;
    }
    const order = orders.get(k);
    const merged =
      Array.isArray(v) && order !== undefined
        ? mergeList(Array.isArray(before) ? before : undefined, v, problems, [...fields, k], [...at, k], order)
        : strategicMerge(before, v, problems, [...fields, k], [...at, k]);
    if (merged === undefined) delete out[k];
    else out[k] = merged;
  }
  // An order for a list the patch does not otherwise change.
  for (const [k, order] of orders) {
    const list = out[k];
    const key = mergeKey([...fields, k]);
    if (k in patch || !Array.isArray(list) || key === undefined) continue;
    out[k] = serverOrder(list, order, list, key);
  }
  return out;
}

/**
 * `merged` in the API server's order (apimachinery's normalizeElementOrder): the items named in `patchOrder` sorted
 * by it, the others by `original`, then interleaved — the earlier of two items `original` both has goes first, else
 * the patch's item.
 */
function serverOrder(merged: Json[], patchOrder: Json[], original: Json[], key: string): Json[] {
  const idOf = (v: Json) => (isMap(v) ? v[key] : undefined);
  const rank = (list: Json[]) => {
    const m = new Map<Json | undefined, number>();
    list.forEach((v, i) => {
      const id = isMap(v) ? v[key] : v;
      if (!m.has(id)) m.set(id, i);
    });
    return m;
  };
  const inPatch = rank(patchOrder);
  const inOriginal = rank(original);
  const byRank = (r: Map<Json | undefined, number>) => (a: Json, b: Json) =>
    (r.get(idOf(a)) ?? 0) - (r.get(idOf(b)) ?? 0);
  const patchItems = merged.filter((v) => inPatch.has(idOf(v))).sort(byRank(inPatch));
  const serverOnly = merged.filter((v) => !inPatch.has(idOf(v))).sort(byRank(inOriginal));
  const out: Json[] = [];
  let i = 0;
  let j = 0;
  while (i < serverOnly.length || j < patchItems.length) {
    const left = serverOnly[i];
    const right = patchItems[j];
    if (right === undefined || left === undefined) {
      out.push((left ?? right) as Json);
      if (left !== undefined) i++;
      else j++;
      continue;
    }
    const li = inOriginal.get(idOf(left));
    const ri = inOriginal.get(idOf(right));
    if (li !== undefined && ri !== undefined && li < ri) {
      out.push(left);
      i++;
    } else {
      out.push(right);
      j++;
    }
  }
  return out;
}

function mergeList(
  original: Json[] | undefined,
  patch: Json[],
  problems: MergeProblem[],
  fields: readonly string[],
  at: readonly (string | number)[],
  order?: Json[],
): Json[] {
  const key = mergeKey(fields);
  const replaceAll = patch.some((e) => isMap(e) && e["$patch"] === "replace" && Object.keys(e).length === 1);
  if (replaceAll) return stripDirectives(patch.filter((e) => !(isMap(e) && e["$patch"] === "replace"))) as Json[];
  if (key === undefined) {
    // An atomic list: replaced whole. A directive in it has nothing to act on.
    patch.forEach((e, i) => {
      if (isMap(e) && e["$patch"] !== undefined)
        problems.push({
          path: joinPath([...at, i, "$patch"]),
          message: `${fields[fields.length - 1] ?? "this list"} is not a keyed list: it is replaced whole, so items cannot be merged or deleted one by one`,
        });
    });
    return stripDirectives(patch) as Json[];
  }
  const rest: Json[] = original === undefined ? [] : clone(original);
  const out: Json[] = [];
  patch.forEach((item, i) => {
    if (!isMap(item)) {
      problems.push({
        path: joinPath([...at, i]),
        message: `items of ${fields[fields.length - 1]} are objects keyed by ${key}`,
      });
      return;
    }
    const id = item[key];
    if (id === undefined) {
      problems.push({
        path: joinPath([...at, i, key]),
        message: `is required: items of ${fields[fields.length - 1]} merge by ${key}`,
      });
      return;
    }
    const index = rest.findIndex((o) => isMap(o) && o[key] === id);
    const before = index >= 0 ? rest.splice(index, 1)[0] : undefined;
    if (item["$patch"] === "delete") return;
    const merged = strategicMerge(before, item, problems, fields, [...at, i]);
    if (merged !== undefined) out.push(merged);
  });
  return serverOrder([...out, ...rest], order ?? patch, original ?? [], key);
}
