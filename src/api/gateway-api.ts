// Gateway API resource shapes (gateway.networking.k8s.io v1, plus XListenerSet of gateway.networking.x-k8s.io).
// Only the fields Sluice reads are typed; unknown fields are kept by the loader and ignored.

import type { Resource } from "./resource.js";

export const GATEWAY_API_GROUP = "gateway.networking.k8s.io";
export const GATEWAY_API_X_GROUP = "gateway.networking.x-k8s.io";
/** The Gateway API Inference Extension's group (InferencePool). */
export const INFERENCE_GROUP = "inference.networking.k8s.io";
export const SLUICE_CONTROLLER_NAME = "sluice.dev/gateway-controller";
/** The label Gateway API implementations put on what they create for a Gateway (its Envoy Service, its Secrets). */
export const GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name";

export interface ParentReference {
  readonly group?: string;
  readonly kind?: string;
  readonly namespace?: string;
  readonly name: string;
  readonly sectionName?: string;
  readonly port?: number;
}

export interface BackendObjectReference {
  readonly group?: string;
  readonly kind?: string;
  readonly name: string;
  readonly namespace?: string;
  readonly port?: number;
}

export interface SecretObjectReference {
  readonly group?: string;
  readonly kind?: string;
  readonly name: string;
  readonly namespace?: string;
}

export interface GatewayClassSpec {
  readonly controllerName: string;
  readonly parametersRef?: {
    readonly group: string;
    readonly kind: string;
    readonly name: string;
    readonly namespace?: string;
  };
}
export type GatewayClass = Resource<"GatewayClass", GatewayClassSpec>;

export type ProtocolType = "HTTP" | "HTTPS" | "TLS" | "TCP" | "UDP";

export interface GatewayTLSConfig {
  readonly mode?: "Terminate" | "Passthrough";
  readonly certificateRefs?: readonly SecretObjectReference[];
  readonly options?: Readonly<Record<string, string>>;
}

export interface RouteGroupKind {
  readonly group?: string;
  readonly kind: string;
}

export interface AllowedRoutes {
  readonly namespaces?: {
    readonly from?: "All" | "Same" | "Selector";
    readonly selector?: LabelSelector;
  };
  readonly kinds?: readonly RouteGroupKind[];
}

export interface LabelSelector {
  readonly matchLabels?: Readonly<Record<string, string>>;
  readonly matchExpressions?: readonly {
    readonly key: string;
    readonly operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
    readonly values?: readonly string[];
  }[];
}

export interface Listener {
  readonly name: string;
  readonly hostname?: string;
  readonly port: number;
  readonly protocol: ProtocolType;
  readonly tls?: GatewayTLSConfig;
  readonly allowedRoutes?: AllowedRoutes;
}

export interface GatewaySpec {
  readonly gatewayClassName: string;
  readonly listeners: readonly Listener[];
  readonly addresses?: readonly { readonly type?: string; readonly value: string }[];
  readonly infrastructure?: {
    readonly parametersRef?: { readonly group: string; readonly kind: string; readonly name: string };
  };
}
export type Gateway = Resource<"Gateway", GatewaySpec>;

export interface ListenerSetSpec {
  readonly parentRef: ParentReference;
  readonly listeners: readonly Listener[];
}
export type ListenerSet = Resource<"ListenerSet" | "XListenerSet", ListenerSetSpec>;

export type PathMatchType = "Exact" | "PathPrefix" | "RegularExpression";
export type StringMatchType = "Exact" | "RegularExpression";

export interface HTTPPathMatch {
  readonly type?: PathMatchType;
  readonly value?: string;
}
export interface HTTPHeaderMatch {
  readonly type?: StringMatchType;
  readonly name: string;
  readonly value: string;
}
export interface HTTPQueryParamMatch {
  readonly type?: StringMatchType;
  readonly name: string;
  readonly value: string;
}
export interface HTTPRouteMatch {
  readonly path?: HTTPPathMatch;
  readonly headers?: readonly HTTPHeaderMatch[];
  readonly queryParams?: readonly HTTPQueryParamMatch[];
  readonly method?: string;
}

export interface HTTPHeader {
  readonly name: string;
  readonly value: string;
}
export interface HTTPHeaderFilter {
  readonly set?: readonly HTTPHeader[];
  readonly add?: readonly HTTPHeader[];
  readonly remove?: readonly string[];
}
export interface HTTPPathModifier {
  readonly type: "ReplaceFullPath" | "ReplacePrefixMatch";
  readonly replaceFullPath?: string;
  readonly replacePrefixMatch?: string;
}
export interface HTTPRequestRedirectFilter {
  readonly scheme?: "http" | "https";
  readonly hostname?: string;
  readonly path?: HTTPPathModifier;
  readonly port?: number;
  readonly statusCode?: 301 | 302 | 303 | 307 | 308;
}
export interface HTTPURLRewriteFilter {
  readonly hostname?: string;
  readonly path?: HTTPPathModifier;
}
export interface HTTPRequestMirrorFilter {
  readonly backendRef: BackendObjectReference;
  readonly percent?: number;
  readonly fraction?: { readonly numerator: number; readonly denominator?: number };
}
export interface HTTPRouteFilter {
  readonly type:
    | "RequestHeaderModifier"
    | "ResponseHeaderModifier"
    | "RequestRedirect"
    | "URLRewrite"
    | "RequestMirror"
    | "CORS"
    | "ExtensionRef";
  readonly requestHeaderModifier?: HTTPHeaderFilter;
  readonly responseHeaderModifier?: HTTPHeaderFilter;
  readonly requestRedirect?: HTTPRequestRedirectFilter;
  readonly urlRewrite?: HTTPURLRewriteFilter;
  readonly requestMirror?: HTTPRequestMirrorFilter;
}

export interface HTTPBackendRef extends BackendObjectReference {
  readonly weight?: number;
  readonly filters?: readonly HTTPRouteFilter[];
}

export interface HTTPRouteRule {
  readonly name?: string;
  readonly matches?: readonly HTTPRouteMatch[];
  readonly filters?: readonly HTTPRouteFilter[];
  readonly backendRefs?: readonly HTTPBackendRef[];
  readonly timeouts?: { readonly request?: string; readonly backendRequest?: string };
}

export interface HTTPRouteSpec {
  readonly parentRefs?: readonly ParentReference[];
  readonly hostnames?: readonly string[];
  readonly rules?: readonly HTTPRouteRule[];
}
export type HTTPRoute = Resource<"HTTPRoute", HTTPRouteSpec>;

export interface ReferenceGrantSpec {
  readonly from: readonly { readonly group: string; readonly kind: string; readonly namespace: string }[];
  readonly to: readonly { readonly group: string; readonly kind: string; readonly name?: string }[];
}
export type ReferenceGrant = Resource<"ReferenceGrant", ReferenceGrantSpec>;

/**
 * Gateway API Inference Extension InferencePool (inference.networking.k8s.io/v1): model server Pods chosen per request
 * by an endpoint picker (EPP) that the gateway calls over ext_proc. Only what Sluice reads; the EPP itself watches the
 * Pods of `selector`.
 */
export interface InferencePoolSpec {
  readonly selector?: unknown;
  readonly targetPorts?: readonly { readonly number?: number }[];
  readonly appProtocol?: string;
  readonly endpointPickerRef?: {
    readonly group?: string;
    readonly kind?: string;
    readonly name?: string;
    readonly port?: { readonly number?: number };
    readonly failureMode?: "FailOpen" | "FailClose";
  };
}
export type InferencePool = Resource<"InferencePool", InferencePoolSpec>;

export interface GRPCMethodMatch {
  readonly type?: "Exact" | "RegularExpression";
  readonly service?: string;
  readonly method?: string;
}
export interface GRPCRouteMatch {
  readonly method?: GRPCMethodMatch;
  readonly headers?: readonly HTTPHeaderMatch[];
}
export interface GRPCRouteFilter {
  readonly type: "RequestHeaderModifier" | "ResponseHeaderModifier" | "RequestMirror" | "ExtensionRef";
  readonly requestHeaderModifier?: HTTPHeaderFilter;
  readonly responseHeaderModifier?: HTTPHeaderFilter;
  readonly requestMirror?: HTTPRequestMirrorFilter;
}
export interface GRPCBackendRef extends BackendObjectReference {
  readonly weight?: number;
  readonly filters?: readonly GRPCRouteFilter[];
}
export interface GRPCRouteRule {
  readonly name?: string;
  readonly matches?: readonly GRPCRouteMatch[];
  readonly filters?: readonly GRPCRouteFilter[];
  readonly backendRefs?: readonly GRPCBackendRef[];
}
export interface GRPCRouteSpec {
  readonly parentRefs?: readonly ParentReference[];
  readonly hostnames?: readonly string[];
  readonly rules?: readonly GRPCRouteRule[];
}
export type GRPCRoute = Resource<"GRPCRoute", GRPCRouteSpec>;
