// The Sluice console: fetches /console/api/state and renders it. Plain DOM, no framework; text is always set with
// textContent, so nothing from the configuration can become markup.

/** Creates an element with attributes and children (strings become text). */
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return e;
}

function fill(id, ...children) {
  const body = document.querySelector(`#${id} .body`);
  body.replaceChildren(...children.flat());
}

function table(headers, rows, attrs = {}) {
  return el(
    "table",
    attrs,
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        headers.map((h) => el("th", {}, h)),
      ),
    ),
    el("tbody", {}, rows),
  );
}

function compact(v) {
  const t = JSON.stringify(v) ?? "null";
  return t.length > 160 ? `${t.slice(0, 159)}…` : t;
}

function renderProblems(resources) {
  const broken = resources.filter((r) => r.problems.length > 0);
  if (broken.length === 0) return [el("p", { class: "ok", "data-testid": "no-problems" }, "No problems.")];
  return broken.flatMap((r) =>
    r.problems.map((p) =>
      el(
        "div",
        { class: `problem${p.severity === "warning" ? " warning-row" : ""}`, "data-testid": "problem" },
        el("span", { class: p.severity }, p.severity.toUpperCase()),
        " ",
        el("strong", { "data-testid": "problem-resource" }, `${r.kind} ${r.name}`),
        p.path ? [" — ", el("span", { class: "path", "data-testid": "problem-path" }, p.path)] : "",
        el("div", { "data-testid": "problem-message" }, p.message),
        el("div", { class: "muted" }, p.where, p.consequence ? ` (${p.consequence})` : ""),
      ),
    ),
  );
}

function renderEnvoys(envoys) {
  if (envoys.length === 0) return [el("p", { class: "muted" }, "No Envoy connected.")];
  return envoys.map((e) =>
    el(
      "div",
      { "data-testid": "envoy" },
      el("h3", {}, `${e.gateway} `, el("span", { class: "muted mono" }, `node ${e.node} · ${e.protocol}`)),
      table(
        ["type", "state", "sent version", "ACKed version", "Envoy's error"],
        e.types.map((t) =>
          el(
            "tr",
            { "data-testid": `xds-type-${t.type}` },
            el("td", {}, t.type),
            el("td", { class: t.state === "NACK" ? "error" : t.state === "ACK" ? "ok" : "muted" }, t.state),
            el("td", { class: "mono" }, t.sentVersion ?? "—"),
            el("td", { class: "mono" }, t.ackedVersion ?? "—"),
            el(
              "td",
              {},
              t.lastNack
                ? el("div", { class: "nack", "data-testid": "nack-message" }, t.lastNack.message)
                : el("span", { class: "muted" }, "—"),
            ),
          ),
        ),
      ),
    ),
  );
}

function policySection(title, policy) {
  const entries = Object.entries(policy ?? {});
  if (entries.length === 0) return [];
  return [
    el("div", { class: "muted" }, title),
    ...entries.map(([field, f]) => {
      const values = f.combined ?? [f];
      return el(
        "div",
        { class: "policy", "data-testid": "policy-field" },
        el("span", { class: "field" }, field),
        f.combined ? el("span", { class: "muted" }, ` (${f.combined.length} rules combined)`) : "",
        values.map((v) =>
          el(
            "div",
            {},
            el("code", {}, compact(v.value)),
            el(
              "span",
              { class: "from", "data-testid": "policy-from" },
              `from ${v.from.kind} ${v.from.name} [${v.from.level}: ${v.from.target}]`,
            ),
          ),
        ),
      );
    }),
  ];
}

function renderRule(rule) {
  const p = rule.policy ?? {};
  const backends = p.backends ?? [];
  const anyPolicy = Object.keys(p.preRouting ?? {}).length + Object.keys(p.traffic ?? {}).length + backends.length > 0;
  return el(
    "details",
    { open: true, "data-testid": "rule" },
    el(
      "summary",
      {},
      `rule ${rule.index}${rule.name ? ` "${rule.name}"` : ""} `,
      el("code", {}, compact(rule.matches)),
    ),
    el(
      "div",
      { class: "policy", "data-testid": "effective-policy" },
      anyPolicy ? "" : el("span", { class: "muted" }, "no policy applies"),
      policySection("pre-routing traffic policy", p.preRouting),
      policySection("traffic policy", p.traffic),
      backends.flatMap((b) => [
        ...policySection(`backend policy: ${b.backend} (cluster ${b.cluster})`, b.policy),
        ...(b.subBackends ?? []).flatMap((s) => policySection(`  ${b.backend} → ${s.name}`, s.policy)),
      ]),
      rule.notApplied.length > 0
        ? el(
            "div",
            { class: "warning" },
            "not applied here:",
            rule.notApplied.map((n) =>
              el(
                "div",
                { class: "muted" },
                `${n.from.kind} ${n.from.name}${n.field ? ` field ${n.field}` : ""}: ${n.reason}`,
              ),
            ),
          )
        : "",
    ),
    el(
      "div",
      { class: "policy" },
      "backends: ",
      el("span", { "data-testid": "backends" }, rule.backendRefs.join(", ") || "none"),
    ),
  );
}

function renderGateways(gateways) {
  if (gateways.length === 0) return [el("p", { class: "muted" }, "No Gateway served.")];
  return gateways.map((g) =>
    el(
      "details",
      { open: true, "data-testid": "gateway" },
      el("summary", {}, el("strong", {}, `Gateway ${g.name}`)),
      g.listeners.map((l) =>
        el(
          "details",
          { open: true, "data-testid": "listener" },
          el("summary", {}, `listener ${l.name} · ${l.protocol} :${l.port}${l.hostname ? ` · ${l.hostname}` : ""}`),
          l.frontend
            ? el(
                "div",
                { class: "policy", "data-testid": "frontend-policy" },
                policySection("frontend policy (the port's)", l.frontend),
              )
            : "",
          l.routes.length === 0 ? el("div", { class: "muted policy" }, "no routes") : "",
          l.routes.map((r) =>
            el(
              "details",
              { open: true, "data-testid": "route", "data-route": r.name },
              el("summary", {}, `HTTPRoute ${r.name}${r.hostnames.length ? ` · ${r.hostnames.join(", ")}` : ""}`),
              r.rules.map(renderRule),
            ),
          ),
        ),
      ),
    ),
  );
}

function renderLlm(usage) {
  const since = el("p", { class: "muted" }, `Since ${new Date(usage.since).toLocaleString()}, from Sluice's counters.`);
  if (usage.llm.length === 0) return [since, el("p", { class: "muted" }, "No LLM requests.")];
  return [
    since,
    table(
      [
        "route",
        "model",
        "provider",
        "requests",
        "errors",
        "input tokens",
        "output tokens",
        "cached input",
        "reasoning",
      ],
      usage.llm.map((r) =>
        el(
          "tr",
          { "data-testid": "llm-row" },
          el("td", {}, `${r.gateway} ${r.route}`),
          el("td", {}, r.model),
          el("td", {}, r.provider),
          el("td", {}, r.requests),
          el("td", { class: r.errors > 0 ? "error" : "" }, r.errors),
          el("td", {}, r.inputTokens),
          el("td", {}, r.outputTokens),
          el("td", {}, r.cachedInputTokens),
          el("td", {}, r.reasoningTokens),
        ),
      ),
    ),
  ];
}

function renderMcp(targets) {
  if (targets.length === 0) return [el("p", { class: "muted" }, "No MCP backend configured.")];
  return [
    table(
      ["backend", "target", "kind", "calls (last hour)", "errors", "health"],
      targets.map((t) =>
        el(
          "tr",
          { "data-testid": "mcp-target" },
          el("td", {}, t.backend),
          el("td", {}, t.target),
          el("td", {}, t.kind),
          el("td", {}, t.requests),
          el("td", { class: t.errors > 0 ? "error" : "" }, t.errors),
          el(
            "td",
            { class: t.health === "healthy" ? "ok" : t.health === "no calls in the last hour" ? "muted" : "error" },
            t.health,
          ),
        ),
      ),
    ),
  ];
}

function renderResources(resources) {
  return [
    table(
      ["resource", "state", "conditions"],
      resources.map((r) =>
        el(
          "tr",
          { "data-testid": "resource" },
          el("td", {}, `${r.kind} ${r.name}`),
          el(
            "td",
            { class: r.problems.some((p) => p.severity === "error") ? "error" : r.problems.length ? "warning" : "ok" },
            r.problems.length ? `${r.problems.length} problem(s)` : "ok",
          ),
          el(
            "td",
            { class: "muted" },
            r.conditions.map((c) => `${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ""}`).join(", "),
          ),
        ),
      ),
    ),
  ];
}

async function refresh() {
  try {
    const res = await fetch("/console/api/state", { cache: "no-store" });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const s = await res.json();
    const nacks = s.envoys.flatMap((e) => e.types).filter((t) => t.state === "NACK").length;
    document.getElementById("summary").textContent =
      `${s.problems} problem(s) · ${s.envoys.length} Envoy(s) connected, ${nacks} NACK(s) · ` +
      `last reload ${s.lastReloadAt ? new Date(s.lastReloadAt).toLocaleTimeString() : "—"}`;
    fill("problems", renderProblems(s.resources));
    fill("envoys", renderEnvoys(s.envoys));
    fill("gateways", renderGateways(s.gateways));
    fill("llm", renderLlm(s.usage));
    fill("mcp", renderMcp(s.mcp));
    fill("resources", renderResources(s.resources));
    document.body.dataset.loaded = "true";
  } catch (e) {
    document.getElementById("summary").textContent = `cannot reach Sluice: ${e.message}`;
  }
}

refresh();
setInterval(refresh, 5000);
