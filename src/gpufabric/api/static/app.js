// gpufabric dashboard: vanilla JS over the v1 API. The token lives in sessionStorage and is
// sent as a Bearer header; every text goes through textContent (never HTML).
"use strict";

const API = "/api/v1";
const PHASES = ["quarantine", "swap", "join", "done"];
const POLL_MS = 2000;
const OFFLOAD_MS = 10000;  // the offload report reads every DPU: not on every refresh
const state = { token: sessionStorage.getItem("gf-token") || "", me: null, colours: new Map(), etags: new Map(),
                cache: new Map(), drift: new Map(), streams: new Set(), timer: null, focused: "",
                offloadAt: 0, offloadBusy: false };

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

async function api(path, opts = {}) {
  const headers = { Authorization: `Bearer ${state.token}`, ...(opts.body ? { "Content-Type": "application/json" } : {}) };
  const method = opts.method || "GET";
  if (method === "GET" && state.etags.has(path)) headers["If-None-Match"] = state.etags.get(path);
  const r = await fetch(API + path, { method, headers, body: opts.body ? JSON.stringify(opts.body) : undefined });
  if (r.status === 304) return state.cache.get(path);
  const data = r.headers.get("content-type")?.includes("json") ? await r.json() : await r.text();
  if (!r.ok) {
    const err = new Error(data?.error?.message || `HTTP ${r.status}`);
    err.status = r.status;
    throw err;
  }
  if (method === "GET" && r.headers.get("etag")) {
    state.etags.set(path, r.headers.get("etag"));
    state.cache.set(path, data);
  }
  return data;
}

// A tenant's colour: the palette entry (app.css .t0-.t9) its name hashes to (FNV-1a), or on a
// clash with a tenant already shown the next free one; kept for the session. Quarantine: grey.
const PALETTE = 10;
function hashName(s) {
  let h = 2166136261;
  for (const c of s) h = Math.imul(h ^ c.codePointAt(0), 16777619) >>> 0;
  return h;
}

function colour(tenant) {
  if (tenant === "quarantine") return "quarantine";
  if (!state.colours.has(tenant)) {
    const taken = new Set(state.colours.values());
    let k = hashName(tenant) % PALETTE;
    for (let i = 0; i < PALETTE && taken.has(`t${k}`); i++) k = (k + 1) % PALETTE;
    state.colours.set(tenant, `t${k}`);
  }
  return state.colours.get(tenant);
}

function fmtTime(iso) {
  if (!iso) return "open end";
  const d = new Date(iso);
  return d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

// ------------------------------------------------------------------ sign-in
async function signIn(token) {
  state.token = token;
  const probe = await api("/nodes?limit=1");  // 401 for a bad token
  sessionStorage.setItem("gf-token", token);
  let role = "admin";
  try { await api("/tokens"); } catch (e) { role = e.status === 403 ? "tenant" : role; }
  state.me = { role, total: probe.total };
  $("#who").textContent = role === "admin" ? "Signed in as an admin" : "Signed in as a tenant (you see only your nodes)";
  $("#signin").hidden = true;
  $("#app").hidden = false;
  $("#signout").hidden = false;
  $("#move-form").hidden = role !== "admin";
  $("#audit-tools").hidden = role !== "admin";
  await refresh();
  state.timer = setInterval(() => refresh().catch(report), POLL_MS);
}

function signOut() {
  sessionStorage.removeItem("gf-token");
  clearInterval(state.timer);
  state.token = "";
  state.etags.clear();
  state.cache.clear();
  $("#app").hidden = true;
  $("#signin").hidden = false;
  $("#signout").hidden = true;
  $("#who").textContent = "";
  $("#token").value = "";
  $("#token").focus();
}

function report(e) {
  if (e.status === 401) { signOut(); $("#signin-error").textContent = "Your token is no longer valid."; }
  else console.error(e);
}

// ------------------------------------------------------------------ panels
async function refresh() {
  const nodes = await api("/nodes?limit=1000");
  const tenants = new Set(nodes.items.flatMap((n) => [n.tenant, ...(n.slots || []).map((s) => s.tenant)]));
  [...tenants].sort().forEach(colour);  // first, by name: the same tenants get the same colours
  await Promise.all([renderAudit(), renderLeases(), renderMoves(), renderEvents()]);
  await renderMap(nodes, tenants);  // after the audit: it marks drifted ports
  renderOffload().catch(report);  // reads every DPU: never holds up the other panels
}

// One cell per fabric and node: the lines of the node's fabrics.<name>.summary (the same cells
// as `gpufabric node list`). A line holding the port of a violation of that fabric is marked drifted.
function fabricLine(fabric, line, node, tenant) {
  const words = line.split(/[\s/]+/).filter(Boolean);
  const hit = words.find((w) => state.drift.has(`${fabric}|${w}`));
  const key = hit ? `${fabric}|${hit}` : "";
  const drift = hit ? state.drift.get(key) : "";
  const cls = `port ${colour(tenant)}${drift ? " drift" : ""}${key && state.focused === key ? " focus" : ""}`;
  // only drifted ports are tab stops (a 400-node map would be thousands); drill-down focuses them
  const attrs = { class: cls, "data-fabric": fabric, tabindex: drift ? "0" : "-1",
                  title: drift ? `${node} ${fabric} ${line} — ${drift}` : `${node} ${fabric} ${line}`,
                  "aria-label": `${fabric} ${line}: ${tenant}${drift ? ", drift: " + drift : ""}` };
  if (key) attrs.id = `port-${key}`;
  return el("li", attrs, drift ? "\u26a0 " : "", line);
}

async function renderMap(data, tenants) {
  const fabrics = [];
  for (const n of data.items) for (const f of Object.keys(n.fabrics || {})) if (!fabrics.includes(f)) fabrics.push(f);
  const head = $("#map thead tr");
  const want = ["Node", "Tenant", "State", ...fabrics];
  if ([...head.children].map((th) => th.textContent).join("|") !== want.join("|"))
    head.replaceChildren(...want.map((h) => el("th", { scope: "col" }, h)));
  await renderDrawings(data);
  const rows = data.items.map((n) => {
    const cells = fabrics.map((f) => {
      const lines = (n.fabrics?.[f]?.summary || "").split("\n").filter(Boolean);
      return el("td", { "data-fabric": f }, lines.length
        ? el("ul", { class: "ports" }, ...lines.map((line) => fabricLine(f, line, n.name, n.tenant))) : "-");
    });
    return el("tr", { "data-node": n.name },
      el("th", { scope: "row" }, n.name),
      el("td", {}, el("span", { class: `badge ${colour(n.tenant)}` }, n.tenant)),
      el("td", {}, n.state), ...cells);
  });
  fill($("#map tbody"), rows);
  const legend = () => [...tenants].sort().map((t) => el("span", { class: `badge ${colour(t)}`, "data-tenant": t }, t));
  fill($("#legend"), legend());
  fill($("#draw-legend"), [...legend().filter((e) => e.dataset.tenant !== "quarantine"),
    el("span", { class: "badge quarantine", "data-tenant": "quarantine" }, "quarantine (no tenant)")]);
  const nodes = $("#move-node");
  if (!$("#move-form").hidden && nodes.options.length !== data.items.length) {
    nodes.replaceChildren(...data.items.map((n) => el("option", { value: n.name }, n.name)));
    const ts = await api("/tenants?limit=1000");
    $("#move-tenant").replaceChildren(el("option", { value: "quarantine" }, "quarantine (release)"),
      ...ts.items.map((t) => el("option", { value: t.name }, t.name)));
  }
}

// The drawings (draw.js): redrawn when the nodes' answer changed (an unchanged one is the cached
// object of a 304). A host's GPUs go by slot when a slot of it is live or its lease's offering is
// shared (`shared: slots`, e.g. vm-host): then a GPU in no live slot is in quarantine.
async function renderDrawings(data) {
  const [leases, offerings] = await Promise.all([api("/leases?state=active&limit=1000"),
    api("/offerings?limit=1000").catch(() => ({ items: [] }))]);
  if (state.drawn === data && state.drawnLeases === leases) return;
  state.drawn = data;
  state.drawnLeases = leases;
  const sharedOffer = new Set(offerings.items.filter((o) => o.settings?.shared === "slots").map((o) => o.name));
  const hostLease = new Map(leases.items.map((l) => [l.node, l]));
  const isShared = (n) => (n.slots || []).some((s) => s.tenant !== "quarantine") ||
    sharedOffer.has(hostLease.get(n.name)?.offering);
  GfDraw.hosts($("#boards"), data.items, isShared, colour);
  const drawn = GfDraw.fabrics($("#fabrics"), data.items, isShared, colour);
  $("#fabrics-none").textContent = drawn.length ? "" : "No port has a path up its fabric yet.";
}

async function renderLeases() {
  const data = await api("/leases?state=active&limit=1000");
  fill($("#leases tbody"), data.items.map((l) => el("tr", {},
    el("td", {}, String(l.id)), el("td", {}, l.node),
    el("td", {}, el("span", { class: `badge ${colour(l.tenant)}` }, l.tenant)),
    el("td", {}, l.networks.join(", ") || "-"), el("td", {}, fmtTime(l.start)), el("td", {}, fmtTime(l.end)))));
}

function phaseList(m) {
  const at = PHASES.indexOf(m.phase);
  return el("ol", { class: "phases", "aria-label": `phases of move ${m.id}` }, ...PHASES.map((p, i) => {
    let st = i < at || m.status === "done" ? "complete" : i === at ? m.status : "todo";
    if (m.status === "done") st = "complete";
    return el("li", { class: `phase ${st}`, "data-phase": p }, `${p}${st === "complete" ? " \u2713" : st === "failed" ? " \u2717" : ""}`);
  }));
}

async function renderMoves() {
  const data = await api("/moves?limit=10");
  fill($("#moves"), data.items.map((m) => {
    const timing = ["done", "failed", "cancelled"].includes(m.status) ? "" : m.status === "offered" ? " (offered)" : " (in progress)";
    const li = el("li", { class: `move ${m.status}`, "data-move": String(m.id), "data-status": m.status },
      el("strong", {}, `Move ${m.id}: ${m.node} ${m.from_tenant} \u2192 ${m.to_tenant}`),
      el("span", { class: "status" }, ` ${m.status}${timing}`), phaseList(m));
    if (m.error) li.append(el("p", { class: "error" }, m.error));
    if (m.status === "pending" || m.status === "running") follow(m.id);
    return li;
  }));
}

async function follow(id) {
  // Server-sent events over fetch (EventSource cannot send an Authorization header).
  // At most 4 at once: the server caps open streams per token (the periodic refresh shows the rest).
  if (state.streams.has(id) || state.streams.size >= 4) return;
  state.streams.add(id);
  try {
    const r = await fetch(`${API}/moves/${id}/events`, { headers: { Authorization: `Bearer ${state.token}` } });
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const chunk = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (chunk.startsWith("event: move")) {
          const m = JSON.parse(chunk.split("\ndata: ")[1]);
          const li = document.querySelector(`[data-move="${m.id}"]`);
          if (li) {
            li.className = `move ${m.status}`;
            li.dataset.status = m.status;
            li.querySelector(".status").textContent = ` ${m.status}`;
            li.querySelector(".phases").replaceWith(phaseList(m));
          }
        }
      }
    }
  } finally {
    state.streams.delete(id);
  }
}

async function renderAudit() {
  if (state.me.role !== "admin") {
    $("#audit-none").textContent = "The audit is for operators.";
    fill($("#violations tbody"), []);
    return;
  }
  let data = null;
  try { data = await api("/audit"); } catch (e) { if (e.status !== 404) throw e; }
  state.drift.clear();
  if (!data) { $("#audit-none").textContent = "No audit has run yet."; fill($("#violations tbody"), []); return; }
  const vs = data.report.violations;
  $("#audit-none").textContent = `Last audit ${fmtTime(data.at)}: ${vs.length} violation(s).`;
  fill($("#violations tbody"), vs.map((v) => {
    const key = `${v.fabric}|${v.port}`;
    if (v.port) state.drift.set(key, `${v.invariant}: ${v.message}`);
    const where = [v.node, v.device, v.port].filter(Boolean).join(" ");
    const link = v.port ? el("a", { href: `#port-${key}`, class: "drill", onclick: (ev) => drill(ev, key) }, where)
                        : where || "-";
    return el("tr", { class: `sev-${v.severity}` }, el("td", {}, v.severity), el("td", {}, v.invariant),
              el("td", {}, link), el("td", {}, v.message));
  }));
}

function drill(ev, key) {
  ev.preventDefault();
  document.querySelectorAll(".port.focus").forEach((c) => c.classList.remove("focus"));
  state.focused = key;  // the map renders after the audit: a drill before it is kept for that render
  const cell = document.getElementById(`port-${key}`);
  if (!cell) return;
  cell.classList.add("focus");
  cell.scrollIntoView({ block: "center" });
  cell.focus();
}

// The DPU offload panel: /api/v1/offload, shown only when a dpu fabric is configured (the API
// answers 503 otherwise) and to operators (403 for a lessee). Capacity null: 'unknown', no fill.
function showOffload(on) {
  $("#offload").hidden = !on;
  $("#offload-nav").hidden = !on;
}

async function renderOffload(force = false) {
  if (state.me.role !== "admin") { showOffload(false); return; }
  if (state.offloadBusy || (!force && Date.now() - state.offloadAt < OFFLOAD_MS)) return;
  state.offloadAt = Date.now();
  state.offloadBusy = true;
  let data;
  try { data = await api("/offload"); }
  catch (e) {
    if (e.status === 503 || e.status === 403) { showOffload(false); return; }
    $("#offload-at").textContent = `Offload report failed: ${e.message}`;
    return;
  } finally { state.offloadBusy = false; }
  showOffload(true);
  $("#offload-at").textContent = `Read ${fmtTime(new Date().toISOString())}: ${data.tables.length} DPU(s), ` +
    `${data.alerts.length} alert(s).`;
  const num = (v) => el("td", { class: "num" }, String(v));
  fill($("#offload-rows tbody"), data.rows.map((r) => el("tr", { "data-node": r.node, "data-tenant": r.tenant },
    el("th", { scope: "row" }, r.node), el("td", {}, el("span", { class: `badge ${colour(r.tenant)}` }, r.tenant)),
    num(r.hw_flows), num(r.tc_flows), num(r.datapath_flows), num(r.hw_bytes), num(r.tc_bytes), num(r.datapath_bytes))));
  fill($("#offload-tables tbody"), data.tables.map((t) => el("tr", { "data-node": t.node },
    el("th", { scope: "row" }, t.node), el("td", {}, t.nic_model), num(t.used),
    el("td", { class: "num" }, t.capacity === null ? "unknown" : String(t.capacity)),
    el("td", { class: "num" }, t.ratio === null ? "-" : `${(t.ratio * 100).toFixed(1)}%`),
    el("td", {}, t.capacity_source || "no stated capacity for this NIC model"))));
  fill($("#offload-alerts"), data.alerts.map((a) => el("li", { class: `sev-${a.severity}`, "data-kind": a.kind },
    `${a.severity}: ${a.message}`)));
}

async function renderEvents() {
  const data = await api("/events?limit=25");
  fill($("#events tbody"), data.items.map((e) => el("tr", { class: e.outcome },
    el("td", {}, fmtTime(e.at)), el("td", {}, `${e.actor} (${e.role})`), el("td", {}, e.action),
    el("td", {}, e.target), el("td", {}, e.outcome === "ok" ? "ok" : `error: ${e.message}`))));
}

// ------------------------------------------------------------------ wiring
document.addEventListener("DOMContentLoaded", () => {
  $("#signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("#signin-error").textContent = "";
    try { await signIn($("#token").value.trim()); }
    catch (e) { $("#signin-error").textContent = e.status === 401 ? "That token is not valid." : e.message; }
  });
  $("#signout").addEventListener("click", signOut);
  $("#move-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("#move-error").textContent = "";
    try {
      await api("/moves", { method: "POST", body: { node: $("#move-node").value, to_tenant: $("#move-tenant").value } });
      await renderMoves();
    } catch (e) { $("#move-error").textContent = e.message; }
  });
  $("#run-audit").addEventListener("click", async () => {
    $("#audit-status").textContent = "running...";
    try { await api("/audit", { method: "POST" }); state.etags.delete("/audit"); await refresh(); $("#audit-status").textContent = "done"; }
    catch (e) { $("#audit-status").textContent = e.message; }
  });
  if (state.token) signIn(state.token).catch(() => signOut());
  else $("#token").focus();
});
