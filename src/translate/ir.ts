// The intermediate representation: per Gateway, plain readonly data with no Envoy or Kubernetes types.
// translate<Kind> functions produce it from resources; build<EnvoyThing> functions turn it into xDS.

export interface GatewayIR {
  /** `namespace/name` of the Gateway; also the xDS node group its Envoys belong to. */
  readonly key: string;
  readonly listeners: readonly ListenerIR[];
  readonly routeConfigs: readonly RouteConfigIR[];
  readonly clusters: readonly ClusterIR[];
  readonly secrets: readonly SecretIR[];
}

/** One Envoy listener: one bind address and port, shared by every Gateway listener on that port. */
export interface ListenerIR {
  readonly name: string;
  readonly address: string;
  readonly port: number;
  readonly protocol: "HTTP" | "HTTPS";
  /** HTTP: one chain for the port. HTTPS: one chain per Gateway listener, chosen by SNI. */
  readonly filterChains: readonly FilterChainIR[];
}

export interface FilterChainIR {
  readonly name: string;
  /** SNI names this chain answers (`*.suffix` allowed); empty = any (the default chain). */
  readonly serverNames: readonly string[];
  /** TLS termination with these certificates (SDS secret names), several for RSA + ECDSA. */
  readonly tls?: { readonly secrets: readonly string[] };
  /** Route configuration (RDS) of this chain. */
  readonly routeConfigName: string;
}

export interface RouteConfigIR {
  readonly name: string;
  readonly virtualHosts: readonly VirtualHostIR[];
}

/** A TLS certificate and its key, served to Envoy over SDS. */
export interface SecretIR {
  readonly name: string;
  readonly certificateChain: string;
  readonly privateKey: string;
}

export interface VirtualHostIR {
  readonly name: string;
  /** Host names (lowercase, `*` or `*.suffix` wildcards) this virtual host answers. */
  readonly domains: readonly string[];
  readonly routes: readonly RouteIR[];
}

export interface StringMatchIR {
  readonly type: "Exact" | "RegularExpression";
  readonly value: string;
}

export interface RouteMatchIR {
  readonly path: { readonly type: "Exact" | "PathPrefix" | "RegularExpression"; readonly value: string };
  readonly headers: readonly (StringMatchIR & { readonly name: string })[];
  readonly queryParams: readonly (StringMatchIR & { readonly name: string })[];
  readonly method?: string;
}

export interface HeaderMutationIR {
  readonly set: readonly { readonly name: string; readonly value: string }[];
  readonly add: readonly { readonly name: string; readonly value: string }[];
  readonly remove: readonly string[];
}

export interface WeightedBackendIR {
  readonly cluster: string;
  readonly weight: number;
  readonly requestHeaders?: HeaderMutationIR;
  readonly responseHeaders?: HeaderMutationIR;
}

export interface PathRewriteIR {
  readonly type: "ReplaceFullPath" | "ReplacePrefixMatch";
  readonly value: string;
}

export type RouteActionIR =
  | {
      readonly kind: "forward";
      readonly backends: readonly WeightedBackendIR[];
      readonly timeout?: string;
      readonly rewrite?: { readonly hostname?: string; readonly path?: PathRewriteIR };
      readonly mirrors: readonly { readonly cluster: string; readonly percent: number }[];
    }
  | {
      readonly kind: "redirect";
      readonly scheme?: string;
      readonly hostname?: string;
      readonly port?: number;
      readonly path?: PathRewriteIR;
      readonly statusCode: number;
    }
  | { readonly kind: "direct"; readonly status: number; readonly body?: string };

export interface RouteIR {
  /** Names the route back to its source: `httproute/<ns>/<name>/rule/<i>/match/<j>`. */
  readonly name: string;
  readonly match: RouteMatchIR;
  readonly action: RouteActionIR;
  readonly requestHeaders?: HeaderMutationIR;
  readonly responseHeaders?: HeaderMutationIR;
}

export interface EndpointIR {
  readonly address: string;
  readonly port: number;
  readonly ready: boolean;
}

export type ClusterIR =
  | {
      readonly kind: "eds";
      readonly name: string;
      readonly endpoints: readonly EndpointIR[];
      readonly http2: boolean;
    }
  | {
      readonly kind: "dns";
      readonly name: string;
      readonly host: string;
      readonly port: number;
      readonly http2: boolean;
    }
  | {
      readonly kind: "static";
      readonly name: string;
      readonly endpoints: readonly EndpointIR[];
      readonly http2: boolean;
    }
  | { readonly kind: "unix"; readonly name: string; readonly path: string; readonly http2: boolean };
