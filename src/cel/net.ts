// The Kubernetes CEL IP/CIDR library (k8s.io/apiserver/pkg/cel/library ip.go, cidr.go) on @bufbuild/cel.
//
// @bufbuild/cel only knows CEL scalars, lists, maps and protobuf messages, so the opaque `net.IP` / `net.CIDR` types of
// Kubernetes are modelled as two tiny protobuf messages built at load time (no generated code needed). Message
// equality then gives `ip('::1') == ip('::1')` for free, because addresses are stored as canonical bytes.
//
// Parsing follows Go's net/netip as Kubernetes uses it: dotted-decimal IPv4 without leading zeros, RFC 4291 IPv6,
// no zones, and IPv4-mapped IPv6 addresses rejected (Kubernetes rejects them to avoid ambiguous matches).

import type { CelFunc } from "@bufbuild/cel";
import { CelScalar, celFunc, celMethod, objectType } from "@bufbuild/cel";
import type { Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { create, createFileRegistry, type DescMessage, type Registry } from "@bufbuild/protobuf";
import { type ReflectMessage, reflect } from "@bufbuild/protobuf/reflect";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";

const TYPE_BYTES = 12;
const TYPE_UINT32 = 13;
const LABEL_OPTIONAL = 1;

const netFile = create(FileDescriptorProtoSchema, {
  name: "sluice/cel/net.proto",
  package: "sluice.cel",
  syntax: "proto3",
  messageType: [
    { name: "IP", field: [{ name: "addr", number: 1, type: TYPE_BYTES, label: LABEL_OPTIONAL, jsonName: "addr" }] },
    {
      name: "CIDR",
      field: [
        { name: "addr", number: 1, type: TYPE_BYTES, label: LABEL_OPTIONAL, jsonName: "addr" },
        { name: "prefix", number: 2, type: TYPE_UINT32, label: LABEL_OPTIONAL, jsonName: "prefix" },
      ],
    },
  ],
});

/** Registry holding the `sluice.cel.IP` and `sluice.cel.CIDR` message types; pass it to the CEL environment. */
export const netRegistry: Registry = createFileRegistry(netFile, () => undefined);
const ipDesc: DescMessage = netRegistry.getMessage("sluice.cel.IP")!;
const cidrDesc: DescMessage = netRegistry.getMessage("sluice.cel.CIDR")!;

/** CEL types of the two values. */
export const IP_TYPE = objectType(ipDesc);
export const CIDR_TYPE = objectType(cidrDesc);

/** An address as 4 (IPv4) or 16 (IPv6) bytes. */
export type IpBytes = Uint8Array;

export interface ParsedCidr {
  readonly addr: IpBytes;
  readonly prefix: number;
}

/** Parses an address the way netip.ParseAddr does, minus zones and IPv4-mapped IPv6; undefined when invalid. */
export function parseIp(text: string): IpBytes | undefined {
  if (text.includes(":")) {
    const v6 = parseIpv6(text);
    if (v6 === undefined || isV4Mapped(v6)) return undefined;
    return v6;
  }
  return parseIpv4(text);
}

/**
 * Parses a peer address as Envoy reports it. Unlike `parseIp`, an IPv4-mapped IPv6 address (what a dual-stack
 * listener reports for an IPv4 peer) is unmapped to IPv4, so `cidr('10.0.0.0/8').containsIP(source.address)` works.
 */
export function parsePeerIp(text: string): IpBytes | undefined {
  const v6 = text.includes(":") ? parseIpv6(text) : undefined;
  if (v6 !== undefined) return isV4Mapped(v6) ? v6.slice(12) : v6;
  return parseIpv4(text);
}

/** Parses `addr/bits` like netip.ParsePrefix (bits in decimal without leading zeros); undefined when invalid. */
export function parseCidr(text: string): ParsedCidr | undefined {
  const slash = text.indexOf("/");
  if (slash < 0) return undefined;
  const addr = parseIp(text.slice(0, slash));
  const bitsText = text.slice(slash + 1);
  if (addr === undefined || !/^(0|[1-9][0-9]{0,2})$/.test(bitsText)) return undefined;
  const prefix = Number(bitsText);
  if (prefix > addr.length * 8) return undefined;
  return { addr, prefix };
}

function parseIpv4(text: string): IpBytes | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out[i] = n;
  }
  return out;
}

function parseIpv6(text: string): IpBytes | undefined {
  if (text.includes("%")) return undefined; // zones are not addresses
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const parseGroups = (part: string, allowV4Tail: boolean): number[] | undefined => {
    if (part === "") return [];
    const groups: number[] = [];
    const items = part.split(":");
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      if (allowV4Tail && i === items.length - 1 && item.includes(".")) {
        const v4 = parseIpv4(item);
        if (v4 === undefined) return undefined;
        groups.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(item)) return undefined;
        groups.push(Number.parseInt(item, 16));
      }
    }
    return groups;
  };
  let groups: number[];
  if (halves.length === 2) {
    const head = parseGroups(halves[0]!, false);
    const tail = parseGroups(halves[1]!, true);
    if (head === undefined || tail === undefined || head.length + tail.length > 7) return undefined;
    groups = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  } else {
    const all = parseGroups(text, true);
    if (all === undefined || all.length !== 8) return undefined;
    groups = all;
  }
  const out = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    out[2 * i] = groups[i]! >> 8;
    out[2 * i + 1] = groups[i]! & 0xff;
  }
  return out;
}

function isV4Mapped(b: IpBytes): boolean {
  if (b.length !== 16) return false;
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

/** Formats an address canonically: dotted IPv4, RFC 5952 IPv6 (lowercase, longest zero run compressed). */
export function formatIp(b: IpBytes): string {
  if (b.length === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  const groups: number[] = [];
  for (let i = 0; i < 8; i++) groups.push((b[2 * i]! << 8) | b[2 * i + 1]!);
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (g: number[]) => g.map((x) => x.toString(16)).join(":");
  if (bestLen < 2) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLen))}`;
}

/** True when `ip` lies in `addr/prefix` (same family only, as netip.Prefix.Contains). */
export function prefixContains(addr: IpBytes, prefix: number, ip: IpBytes): boolean {
  if (addr.length !== ip.length) return false;
  const full = prefix >> 3;
  for (let i = 0; i < full; i++) if (addr[i] !== ip[i]) return false;
  const rest = prefix & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return ((addr[full]! ^ ip[full]!) & mask) === 0;
}

function masked(addr: IpBytes, prefix: number): IpBytes {
  const out = new Uint8Array(addr.length);
  for (let i = 0; i < addr.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - 8 * i));
    out[i] = addr[i]! & ((0xff << (8 - bits)) & 0xff);
  }
  return out;
}

/**
 * Builds the CEL `IP` value for an address (used for `source.address`). Values are reflected messages, which CEL
 * takes as they are; a plain message would be reflected again on every access.
 */
export function ipValue(addr: IpBytes): ReflectMessage {
  return reflect(ipDesc, create(ipDesc, { addr }));
}

const peerIps = new Map<string, ReflectMessage | undefined>();

/**
 * The CEL `IP` value of a peer address as Envoy reports it (see parsePeerIp), undefined when it is not an IP. The few
 * distinct peers (proxies, clients) are parsed once.
 */
export function peerIpValue(address: string): ReflectMessage | undefined {
  let v = peerIps.get(address);
  if (v === undefined && !peerIps.has(address)) {
    const ip = parsePeerIp(address);
    v = ip === undefined ? undefined : ipValue(ip);
    if (peerIps.size >= 4096) peerIps.clear();
    peerIps.set(address, v);
  }
  return v;
}

function cidrValue(c: ParsedCidr): ReflectMessage {
  return reflect(cidrDesc, create(cidrDesc, { addr: c.addr, prefix: c.prefix }));
}

// The messages are built from the descriptors above, so their shapes are known; protobuf-es types them generically.
interface IpShape {
  readonly addr: Uint8Array;
}
interface CidrShape {
  readonly addr: Uint8Array;
  readonly prefix: number;
}

function ipOf(m: ReflectMessage): IpBytes {
  return (m.message as unknown as IpShape).addr;
}

function cidrOf(m: ReflectMessage): ParsedCidr {
  const c = m.message as unknown as CidrShape;
  return { addr: c.addr, prefix: c.prefix };
}

function mustIp(text: string): IpBytes {
  const ip = parseIp(text);
  // Thrown errors become CEL evaluation errors (the function is called by @bufbuild/cel inside a try).
  if (ip === undefined) throw new Error(`IP Address "${text}" parse error during conversion from string`);
  return ip;
}

function mustCidr(text: string): ParsedCidr {
  const c = parseCidr(text);
  if (c === undefined) throw new Error(`network address parse error during conversion from string: "${text}"`);
  return c;
}

function isMulticast(b: IpBytes): boolean {
  return b.length === 4 ? (b[0]! & 0xf0) === 0xe0 : b[0] === 0xff;
}
function isLoopback(b: IpBytes): boolean {
  return b.length === 4 ? b[0] === 127 : b.every((x, i) => x === (i === 15 ? 1 : 0));
}
function isUnspecified(b: IpBytes): boolean {
  return b.every((x) => x === 0);
}
function isLinkLocalUnicast(b: IpBytes): boolean {
  return b.length === 4 ? b[0] === 169 && b[1] === 254 : b[0] === 0xfe && (b[1]! & 0xc0) === 0x80;
}
function isLinkLocalMulticast(b: IpBytes): boolean {
  return b.length === 4 ? b[0] === 224 && b[1] === 0 && b[2] === 0 : b[0] === 0xff && (b[1]! & 0x0f) === 0x02;
}
function isGlobalUnicast(b: IpBytes): boolean {
  if (b.length === 4 && b.every((x) => x === 255)) return false;
  return !isUnspecified(b) && !isLoopback(b) && !isMulticast(b) && !isLinkLocalUnicast(b);
}

// Values of `cidr('<literal>')` and `ip('<literal>')` found in compiled expressions, so an evaluation does not parse
// the literal again (about half the cost of a typical CIDR rule). Bounded: past the limit, literals are parsed per call.
const LITERAL_LIMIT = 10_000;
const cidrLiterals = new Map<string, ReturnType<typeof cidrValue>>();
const ipLiterals = new Map<string, ReturnType<typeof ipValue>>();

/** Records the `cidr`/`ip` string literals of an expression (called by compileExpression). */
export function registerNetLiterals(expr: Expr | undefined): void {
  if (expr === undefined) return;
  const k = expr.exprKind;
  switch (k.case) {
    case "callExpr": {
      const arg = k.value.args[0];
      if (
        k.value.target === undefined &&
        k.value.args.length === 1 &&
        arg?.exprKind.case === "constExpr" &&
        arg.exprKind.value.constantKind.case === "stringValue"
      ) {
        const text = arg.exprKind.value.constantKind.value;
        if (k.value.function === "cidr" && !cidrLiterals.has(text) && cidrLiterals.size < LITERAL_LIMIT) {
          const c = parseCidr(text);
          if (c !== undefined) cidrLiterals.set(text, cidrValue(c));
        } else if (k.value.function === "ip" && !ipLiterals.has(text) && ipLiterals.size < LITERAL_LIMIT) {
          const ip = parseIp(text);
          if (ip !== undefined) ipLiterals.set(text, ipValue(ip));
        }
      }
      registerNetLiterals(k.value.target);
      for (const a of k.value.args) registerNetLiterals(a);
      return;
    }
    case "selectExpr":
      registerNetLiterals(k.value.operand);
      return;
    case "listExpr":
      for (const e of k.value.elements) registerNetLiterals(e);
      return;
    case "structExpr":
      for (const e of k.value.entries) {
        if (e.keyKind.case === "mapKey") registerNetLiterals(e.keyKind.value);
        registerNetLiterals(e.value);
      }
      return;
    case "comprehensionExpr":
      for (const e of [k.value.iterRange, k.value.accuInit, k.value.loopCondition, k.value.loopStep, k.value.result]) {
        registerNetLiterals(e);
      }
      return;
    default:
      return;
  }
}

const { STRING, BOOL, INT } = CelScalar;

/** The functions of the library, to add to a CEL environment together with `netRegistry`. */
export const netFunctions: readonly CelFunc[] = [
  celFunc("ip", [STRING], IP_TYPE, (s) => ipLiterals.get(s) ?? ipValue(mustIp(s))),
  celFunc("isIP", [STRING], BOOL, (s) => parseIp(s) !== undefined),
  celFunc("ip.isCanonical", [STRING], BOOL, (s) => formatIp(mustIp(s)) === s),
  celFunc("string", [IP_TYPE], STRING, (v) => formatIp(ipOf(v))),
  celMethod("family", IP_TYPE, [], INT, function () {
    return ipOf(this).length === 4 ? 4n : 6n;
  }),
  celMethod("isUnspecified", IP_TYPE, [], BOOL, function () {
    return isUnspecified(ipOf(this));
  }),
  celMethod("isLoopback", IP_TYPE, [], BOOL, function () {
    return isLoopback(ipOf(this));
  }),
  celMethod("isLinkLocalMulticast", IP_TYPE, [], BOOL, function () {
    return isLinkLocalMulticast(ipOf(this));
  }),
  celMethod("isLinkLocalUnicast", IP_TYPE, [], BOOL, function () {
    return isLinkLocalUnicast(ipOf(this));
  }),
  celMethod("isGlobalUnicast", IP_TYPE, [], BOOL, function () {
    return isGlobalUnicast(ipOf(this));
  }),
  celFunc("cidr", [STRING], CIDR_TYPE, (s) => cidrLiterals.get(s) ?? cidrValue(mustCidr(s))),
  celFunc("isCIDR", [STRING], BOOL, (s) => parseCidr(s) !== undefined),
  celFunc("string", [CIDR_TYPE], STRING, (v) => {
    const c = cidrOf(v);
    return `${formatIp(c.addr)}/${c.prefix}`;
  }),
  celMethod("containsIP", CIDR_TYPE, [IP_TYPE], BOOL, function (ip) {
    const c = this.message as unknown as CidrShape;
    return prefixContains(c.addr, c.prefix, ipOf(ip));
  }),
  celMethod("containsIP", CIDR_TYPE, [STRING], BOOL, function (s) {
    const c = cidrOf(this);
    return prefixContains(c.addr, c.prefix, mustIp(s));
  }),
  celMethod("containsCIDR", CIDR_TYPE, [CIDR_TYPE], BOOL, function (other) {
    const c = cidrOf(this);
    const o = cidrOf(other);
    return c.prefix <= o.prefix && prefixContains(c.addr, c.prefix, o.addr);
  }),
  celMethod("containsCIDR", CIDR_TYPE, [STRING], BOOL, function (s) {
    const c = cidrOf(this);
    const o = mustCidr(s);
    return c.prefix <= o.prefix && prefixContains(c.addr, c.prefix, o.addr);
  }),
  celMethod("ip", CIDR_TYPE, [], IP_TYPE, function () {
    return ipValue(cidrOf(this).addr);
  }),
  celMethod("masked", CIDR_TYPE, [], CIDR_TYPE, function () {
    const c = cidrOf(this);
    return cidrValue({ addr: masked(c.addr, c.prefix), prefix: c.prefix });
  }),
  celMethod("prefixLength", CIDR_TYPE, [], INT, function () {
    return BigInt(cidrOf(this).prefix);
  }),
];
