// Lookups by namespace and name over the input's lists, through an index built once per list: resolving thousands
// of backendRefs must not scan every Service or GwBackend each time.

import { SERVICE_NAME_LABEL } from "../api/core.js";
import { namespaceOf } from "../api/resource.js";

interface Named {
  readonly metadata: { readonly name: string; readonly namespace?: string };
}

const byName = new WeakMap<readonly Named[], Map<string, Named>>();

/** The first object of `list` called `namespace/name` (as `list.find` would return it). */
export function findNamed<T extends Named>(list: readonly T[], namespace: string, name: string): T | undefined {
  let index = byName.get(list);
  if (index === undefined) {
    index = new Map();
    for (const o of list) {
      const key = `${namespaceOf(o)}/${o.metadata.name}`;
      if (!index.has(key)) index.set(key, o);
    }
    byName.set(list, index);
  }
  return index.get(`${namespace}/${name}`) as T | undefined;
}

interface Labeled {
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly labels?: Record<string, string> };
}

const byService = new WeakMap<readonly Labeled[], Map<string, Labeled[]>>();

/** The EndpointSlices of Service `namespace/service` (by the `kubernetes.io/service-name` label), in list order. */
export function slicesOfService<T extends Labeled>(
  list: readonly T[],
  namespace: string,
  service: string,
): readonly T[] {
  let index = byService.get(list);
  if (index === undefined) {
    index = new Map();
    for (const o of list) {
      const svc = o.metadata.labels?.[SERVICE_NAME_LABEL];
      if (svc === undefined) continue;
      const key = `${namespaceOf(o)}/${svc}`;
      const slices = index.get(key);
      if (slices === undefined) index.set(key, [o]);
      else slices.push(o);
    }
    byService.set(list, index);
  }
  return (index.get(`${namespace}/${service}`) ?? []) as readonly Labeled[] as readonly T[];
}
