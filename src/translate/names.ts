// The one module that names Envoy resources. Names follow the IR path, so a name in an Envoy config dump leads
// straight back to the resource that produced it.

export function gatewayKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

export function listenerName(gateway: string, port: number): string {
  return `gateway/${gateway}/port/${port}`;
}

export function routeConfigName(gateway: string, port: number): string {
  return `gateway/${gateway}/port/${port}`;
}

export function virtualHostName(gateway: string, port: number, hostname: string): string {
  return `gateway/${gateway}/port/${port}/host/${hostname}`;
}

export function routeName(namespace: string, route: string, rule: number, match: number): string {
  return `httproute/${namespace}/${route}/rule/${rule}/match/${match}`;
}

export function serviceClusterName(namespace: string, service: string, port: number): string {
  return `service/${namespace}/${service}/port/${port}`;
}

export function backendClusterName(namespace: string, backend: string): string {
  return `backend/${namespace}/${backend}`;
}
