// The web console in a real browser (Debian's headless Chromium driven by puppeteer-core) against a real `sluice run`
// whose files hold a broken GwPolicy and whose Envoy NACKed a route (a regex RE2 rejects): what a person looks for is
// on the page — the broken resource first with its field path, Envoy's NACK text, a route's effective policy with the
// policy it came from. Screenshots go to .cache/artifacts/console/.

import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import puppeteer, { type Browser } from "puppeteer-core";
import { projectRoot } from "../../src/cli/paths.js";
import { freePort, request, startEchoUpstream, waitFor } from "../helpers/net.js";
import { startSluice, tempConfigDir } from "../helpers/processes.js";

const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));
const ARTIFACTS = join(projectRoot(), ".cache", "artifacts", "console");

const cfg = tempConfigDir();
after(() => cfg.cleanup());

function yaml(port: number, upstreamPort: number, secondMatch: string): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners: [{ name: http, protocol: HTTP, port: ${port} }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: api
      matches: [{ path: { type: PathPrefix, value: /api } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: up }]
    - matches: [${secondMatch}]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: up }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: up, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${upstreamPort} } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: api-timeout, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: api }]
  traffic:
    timeouts: { request: 7s }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: gw-frontend, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    http: { http1MaxHeaders: 80 }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: broken, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r }]
  traffic:
    timeouts: { request: soon }
`;
}

test("the console shows the broken resource first with its field path, Envoy's NACK text and a route's effective policy", async (t) => {
  assert.ok(CHROMIUM, "chromium is not installed: run scripts/setup.d/chromium.sh");
  mkdirSync(ARTIFACTS, { recursive: true });
  const upstream = await startEchoUpstream("up");
  const port = await freePort();
  cfg.write("all.yaml", yaml(port, upstream.port, "{ path: { type: PathPrefix, value: /second } }"));
  const sluice = await startSluice("run", cfg.dir);
  let browser: Browser | undefined;
  t.after(async () => {
    await browser?.close();
    await sluice.stop();
    await upstream.close();
  });
  await waitFor(
    "the route through Envoy",
    async () => ((await request(port, "/api/x")).status === 200 ? true : undefined),
    30_000,
  ).catch((e: unknown) => {
    throw new Error(`${(e as Error).message}\n--- sluice run output:\n${sluice.output.slice(-40).join("\n")}`);
  });
  // Lookahead is valid JavaScript but not RE2: Envoy NACKs the routes.
  cfg.write("all.yaml", yaml(port, upstream.port, '{ path: { type: RegularExpression, value: "^/(?=x)y" } }'));
  const nack = await waitFor("the NACK", async () => {
    const s = (await (await fetch(`http://127.0.0.1:${sluice.adminPort}/status/xds`)).json()) as {
      streams: { types: { typeUrl: string; lastNack?: { message: string } }[] }[];
    };
    return s.streams.flatMap((st) => st.types).find((x) => x.lastNack !== undefined)?.lastNack;
  });

  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Root in a container: Chromium's sandbox needs user namespaces it may not have here.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const page = await browser.newPage();
  const pageErrors: string[] = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error") pageErrors.push(m.text());
  });
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(`http://127.0.0.1:${sluice.adminPort}/console`, { waitUntil: "networkidle0" });
  await page.waitForSelector("body[data-loaded=true]", { timeout: 15_000 });
  await page.screenshot({ path: join(ARTIFACTS, "top.png") });
  await page.screenshot({ path: join(ARTIFACTS, "full.png"), fullPage: true });

  // The first thing on the page below the header: the broken resource, its field path, the fix the message gives.
  const first = await page.$eval('[data-testid="problem"]', (e) => ({
    resource: e.querySelector('[data-testid="problem-resource"]')?.textContent ?? "",
    path: e.querySelector('[data-testid="problem-path"]')?.textContent ?? "",
    message: e.querySelector('[data-testid="problem-message"]')?.textContent ?? "",
    top: e.getBoundingClientRect().top,
  }));
  assert.equal(first.resource, "GwPolicy default/broken");
  assert.equal(first.path, "spec.traffic.timeouts.request");
  assert.match(first.message, /must be a duration.*got "soon"/);
  assert.ok(first.top < 900, `the first problem is below the fold (top ${first.top})`);
  const order = await page.$$eval("main > section", (ss) => ss.map((s) => s.id));
  assert.equal(order[0], "problems");
  // In the list of every resource too, the broken one comes first.
  const firstResource = await page.$eval('[data-testid="resource"] td', (e) => e.textContent);
  assert.equal(firstResource, "GwPolicy default/broken");

  // Envoy's own words for what it refused, on the row of the type it refused, marked NACK.
  const nackRow = await page.$eval('[data-testid="nack-message"]', (e) => ({
    text: e.textContent ?? "",
    state: e.closest("tr")?.children[1]?.textContent ?? "",
  }));
  assert.equal(nackRow.text, nack.message);
  assert.match(nackRow.text, /regex|RE2|invalid/i);
  assert.equal(nackRow.state, "NACK");
  const summary = await page.$eval("#summary", (e) => e.textContent ?? "");
  assert.match(summary, /1 NACK\(s\)/);

  // The route's effective policy: rule "api" has timeouts from GwPolicy default/api-timeout, and its backend.
  const rule = await page.$$eval('[data-route="default/r"] [data-testid="rule"]', (rules) =>
    rules.map((r) => ({
      summary: r.querySelector("summary")?.textContent ?? "",
      fields: [...r.querySelectorAll('[data-testid="policy-field"]')].map((f) => f.textContent ?? ""),
      backends: r.querySelector('[data-testid="backends"]')?.textContent ?? "",
    })),
  );
  const api = rule.find((r) => r.summary.startsWith('rule 0 "api"'));
  assert.ok(api, JSON.stringify(rule));
  assert.equal(api.fields.length, 1);
  assert.match(
    api.fields[0] ?? "",
    /^timeouts.*"request":"7s".*from GwPolicy default\/api-timeout \[rule: HTTPRoute default\/r rule api\]/,
  );
  assert.equal(api.backends, "GwBackend up");
  // The listener's frontend policy, with the GwPolicy it came from.
  const frontend = await page.$eval(
    '[data-testid="listener"] [data-testid="frontend-policy"]',
    (e) => e.textContent ?? "",
  );
  assert.match(
    frontend,
    /http.*"http1MaxHeaders":80.*from GwPolicy default\/gw-frontend \[gateway: Gateway default\/gw\]/,
  );
  // The gateway tree: Gateway → listener → route.
  const tree = await page.$eval('[data-testid="gateway"]', (g) => g.textContent ?? "");
  assert.match(tree, /Gateway default\/gw.*listener http · HTTP :\d+.*HTTPRoute default\/r/s);

  const explained = await page.$('[data-route="default/r"]');
  await explained?.screenshot({ path: join(ARTIFACTS, "route-policy.png") });
  await (await page.$("#envoys"))?.screenshot({ path: join(ARTIFACTS, "envoys-nack.png") });
  assert.deepEqual(pageErrors, [], "the page logged errors");
  for (const f of ["top.png", "full.png", "route-policy.png", "envoys-nack.png"])
    assert.ok(existsSync(join(ARTIFACTS, f)), `${f} not written`);
});

test("the console is read-only and its API names what it serves", async (t) => {
  cfg.write("all.yaml", yaml(await freePort(), 9, "{ path: { type: PathPrefix, value: /second } }"));
  const sluice = await startSluice("serve", cfg.dir);
  t.after(() => sluice.stop());
  const base = `http://127.0.0.1:${sluice.adminPort}`;
  const post = await fetch(`${base}/console/api/state`, { method: "POST" });
  assert.equal(post.status, 405);
  const page = await fetch(`${base}/console`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get("content-security-policy") ?? "", /default-src 'self'/);
  const state = (await (await fetch(`${base}/console/api/state`)).json()) as {
    problems: number;
    resources: { kind: string; name: string }[];
    gateways: { name: string }[];
  };
  assert.ok(state.problems >= 1);
  assert.deepEqual(state.resources[0], { ...state.resources[0], kind: "GwPolicy", name: "default/broken" });
  assert.deepEqual(
    state.gateways.map((g) => g.name),
    ["default/gw"],
  );
  assert.equal((await fetch(`${base}/console/nope`)).status, 404);
});
