// Where a Gateway's listeners bind: its first spec.addresses value in file mode (the host has it), every address in a
// cluster, where spec.addresses asks for the Envoy Service's address and a pod never has it.

import assert from "node:assert/strict";
import { test } from "node:test";
import { FileSource } from "../../src/sources/file-source.js";
import { makeInput } from "../../src/translate/input.js";
import { TranslationMemo } from "../../src/translate/memo.js";
import { translate } from "../../src/translate/translate.js";
import { xdsToJson } from "../../src/translate/xds/json.js";
import { tempConfigDir } from "../helpers/processes.js";

const GATEWAY = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 203.0.113.7 }]
  listeners: [{ name: http, protocol: HTTP, port: 8080 }]
`;

async function boundAddresses(listenOnGatewayAddress: boolean | undefined, memo?: TranslationMemo): Promise<string[]> {
  const cfg = tempConfigDir();
  try {
    cfg.write("gw.yaml", GATEWAY);
    const load = await new FileSource([cfg.dir]).load();
    const result = translate(makeInput(load.resources, load.sources, load.invalid), {
      impliedGatewayClass: true,
      ...(listenOnGatewayAddress !== undefined ? { listenOnGatewayAddress } : {}),
      ...(memo !== undefined ? { memo } : {}),
    });
    const json = xdsToJson(result.gateways[0]?.xds ?? assert.fail("no gateway")) as unknown as {
      listeners: { address: { socket_address: { address: string } } }[];
    };
    return json.listeners.map((l) => l.address.socket_address.address);
  } finally {
    cfg.cleanup();
  }
}

test("file mode binds the Gateway's first address; a cluster binds every address", async () => {
  assert.deepEqual(await boundAddresses(undefined), ["203.0.113.7"]);
  assert.deepEqual(await boundAddresses(true), ["203.0.113.7"]);
  assert.deepEqual(await boundAddresses(false), ["0.0.0.0"]);
});

test("a memo shared across translations with different binding does not carry the other's listeners", async () => {
  const memo = new TranslationMemo();
  assert.deepEqual(await boundAddresses(true, memo), ["203.0.113.7"]);
  assert.deepEqual(await boundAddresses(false, memo), ["0.0.0.0"]);
});
