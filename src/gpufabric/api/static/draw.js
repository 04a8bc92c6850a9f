// gpufabric dashboard drawings (issue 33): each host's board (its GPUs by module id, under each
// its rail HCA and VM port when the inventory gives their `gpu` affinity) coloured by who holds
// each GPU, and each fabric's switches (leaves, spines, ...) with the hosts under their leaves.
// Plain SVG built with createElementNS; every text goes through textContent (never markup) and
// colours are CSS classes (app.css: .tN, .quarantine), so the page's CSP needs nothing inline.
"use strict";

const GfDraw = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const Q = "quarantine";
  const GPU_W = 44, GPU_GAP = 6, LEFT = 40, TOP = 34;  // board geometry (px)
  const HOST_W = 92, HOST_H = 30, HOST_GAP = 12, SW_W = 96, SW_H = 26, ROW = 78;  // fabric geometry

  function svg(tag, attrs = {}, ...children) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }

  const title = (text) => svg("title", {}, text);
  const text = (x, y, s, cls = "") => svg("text", { x, y, class: cls }, s);

  // Who holds each GPU of a host: on a shared host the slot holding it (quarantine when no live
  // slot does), on any other host the host's own tenant. -> Map module -> {tenant, unit, slot}
  function holders(host, modules, shared) {
    const out = new Map();
    for (const m of modules) {
      const slot = shared ? (host.slots || []).find((s) => s.modules.includes(m)) : null;
      if (!shared) out.set(m, { tenant: host.tenant, unit: host.name, slot: null });
      else if (slot) out.set(m, { tenant: slot.tenant, unit: slot.name, slot });
      else out.set(m, { tenant: Q, unit: null, slot: null });
    }
    return out;
  }

  // The GPU module ids of a node: any fabric view's `gpus` (NVLink), else its slots' and ports' GPUs.
  function modulesOf(node) {
    const mods = new Set();
    for (const v of Object.values(node.fabrics || {})) for (const g of v.gpus || []) if (g.module_id) mods.add(g.module_id);
    if (!mods.size) {
      for (const s of node.slots || []) s.modules.forEach((m) => mods.add(m));
      for (const ps of Object.values(node.ports || {})) for (const p of ps) if (p.gpu) mods.add(p.gpu);
      (node.slot_modules || []).forEach((m) => mods.add(m));
    }
    return [...mods].sort((a, b) => a - b);
  }

  // The GPU-tied ports of a node by module: its rail HCA (infiniband) and VM port (ethernet).
  function railsOf(node) {
    const by = (kind, label) => new Map((node.ports?.[kind] || []).filter((p) => p.gpu)
      .map((p) => [p.gpu, { port: p, label: label(p) }]));
    return { rail: by("infiniband", (p) => p.device), vm: by("ethernet", (p) => p.name) };
  }

  function who(h) {
    if (h.slot) return `slot ${h.slot.name}, tenant ${h.tenant === Q ? "none (quarantine: slot idle)" : h.tenant}`;
    if (h.unit) return `tenant ${h.tenant === Q ? "none (quarantine)" : h.tenant}`;
    return "no slot (quarantine)";
  }

  function cell(kind, name, m, x, y, w, hgt, label, h, colour, what) {
    return svg("g", { class: `cell ${kind}`, "data-module": m, "data-tenant": h.tenant, "data-unit": h.unit || "" },
      title(`${name} ${what} — ${who(h)}`),
      svg("rect", { x, y, width: w, height: hgt, rx: 3, class: `${kind}-rect ${colour(h.tenant)}`, "data-tenant": h.tenant }),
      text(x + w / 2, y + hgt / 2 + 4, label, "cell-label"));
  }

  // One board: the host's name and tenant, a slot bar over each run of GPUs of one slot, then a
  // column per GPU: the GPU, its rail HCA, its VM port (rows only when the inventory has them).
  function board(node, shared, colour) {
    const mods = modulesOf(node);
    const hold = holders(node, mods, shared);
    const { rail, vm } = railsOf(node);
    const rows = [["GPU", null], ...(rail.size ? [["IB", rail]] : []), ...(vm.size ? [["VM", vm]] : [])];
    const width = LEFT + Math.max(mods.length, 4) * (GPU_W + GPU_GAP) + 8;
    const height = TOP + 18 + rows.length * 34 + 6;
    const whole = !shared;
    const frame = svg("rect", { x: 1, y: 1, width: width - 2, height: height - 2, rx: 6,
      class: `board-frame ${whole ? colour(node.tenant) : "shared"}`, "data-tenant": whole ? node.tenant : "" });
    const root = svg("svg", { class: "board", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
      "data-node": node.name, "aria-label": boardLabel(node, shared, hold) }, frame,
      title(node.ghost ? `${node.name}: your slots of this shared host` : shared
        ? `${node.name}: shared host (${node.tenant}), ${(node.slots || []).length} slot(s)` : `${node.name}: ${node.tenant}`),
      text(8, 16, node.name, "board-name"),
      text(width - 8, 16, node.ghost ? "your slots" : shared ? `shared (${node.tenant})` : node.tenant, "board-tenant"));
    // slot bars: runs of consecutive GPUs held by one unit
    let i = 0;
    while (shared && i < mods.length) {
      let j = i;
      const h = hold.get(mods[i]);
      while (j + 1 < mods.length && hold.get(mods[j + 1]).unit === h.unit) j++;
      const x = LEFT + i * (GPU_W + GPU_GAP), w = (j - i + 1) * (GPU_W + GPU_GAP) - GPU_GAP;
      root.append(svg("g", { class: "slot-bar", "data-unit": h.unit || "", "data-tenant": h.tenant },
        title(h.slot ? `${h.slot.name}: ${h.tenant}` : "GPUs in no slot (quarantine)"),
        svg("rect", { x, y: TOP - 12, width: w, height: 14, rx: 2, class: colour(h.tenant) }),
        text(x + w / 2, TOP - 1, barLabel(node, h, j - i + 1), "cell-label")));
      i = j + 1;
    }
    rows.forEach(([label, ports], r) => {
      const y = TOP + 8 + r * 34;
      root.append(text(6, y + 18, label, "row-label"));
      mods.forEach((m, k) => {
        const x = LEFT + k * (GPU_W + GPU_GAP);
        const h = hold.get(m);
        if (!ports) root.append(cell("gpu", node.name, m, x, y, GPU_W, 28, `G${m}`, h, colour, `GPU ${m}`));
        else if (ports.has(m)) {
          const p = ports.get(m);
          const kind = label === "IB" ? "rail" : "vmport";
          const what = label === "IB" ? `${p.label} (rail HCA of GPU ${m})` : `${p.label} (VM port of GPU ${m})`;
          root.append(cell(kind, node.name, m, x, y, GPU_W, 28, p.label, h, colour, what));
        }
      });
    });
    return root;
  }

  // A slot bar's text: its slot and tenant, or on a one-GPU bar as much of the tenant as fits.
  function barLabel(node, h, gpus) {
    const who = h.tenant === Q ? "idle" : h.tenant;
    if (gpus > 1 && h.slot) return `${h.slot.name.slice(node.name.length + 1)} ${who}`;
    return who.length > 7 ? `${who.slice(0, 6)}\u2026` : who;
  }

  function boardLabel(node, shared, hold) {
    const parts = [];
    for (const [m, h] of hold) parts.push(`GPU ${m} ${h.tenant}`);
    return `${node.name}${shared ? " (shared host)" : ""}: ${parts.join(", ") || "no GPUs known"}`;
  }

  // A lessee may see slots of a host it cannot see: a board of just those slots' GPUs.
  function ghostHosts(nodes) {
    const names = new Set(nodes.map((n) => n.name));
    const ghosts = new Map();
    for (const n of nodes) {
      if (!n.host || names.has(n.host)) continue;
      const g = ghosts.get(n.host) || { name: n.host, tenant: "", ghost: true, slots: [], ports: {}, fabrics: {} };
      g.slots.push({ name: n.name, modules: n.slot_modules, tenant: n.tenant });
      ghosts.set(n.host, g);
    }
    return [...ghosts.values()];
  }

  // hosts: draws a board per node that is not a slot; isShared(node) says whether its GPUs go by slot.
  function hosts(container, nodes, isShared, colour) {
    const all = [...nodes.filter((n) => !n.host), ...ghostHosts(nodes)];
    container.replaceChildren(...all.map((n) => {
      const fig = document.createElement("figure");
      fig.className = "host";
      fig.append(board(n, isShared(n), colour));
      return fig;
    }));
  }

  // ------------------------------------------------------------------ fabric
  // The switches of one fabric kind from its ports' paths: tiers (leaf first) of switch names,
  // each switch's uplinks, and each host's leaves. VM ports (Ethernet entries with a `gpu`) hang
  // off the hypervisor's own OVS, not a leaf: they are left out.
  function topology(nodes, kind) {
    const tiers = [];  // tiers[i]: Set of switch names
    const up = new Map();  // switch -> Set of switches above
    const leaves = new Map();  // host -> Set of leaves
    for (const n of nodes) {
      if (n.host) continue;
      for (const p of n.ports?.[kind] || []) {
        if (kind === "ethernet" && p.gpu) continue;
        const path = (p.path || []).map((t) => t.switches || []);
        if (!path.length || !path[0].length) continue;
        path.forEach((sws, i) => {
          (tiers[i] = tiers[i] || new Set());
          for (const s of sws) {
            tiers[i].add(s);
            if (i + 1 < path.length) for (const a of path[i + 1]) (up.get(s) || up.set(s, new Set()).get(s)).add(a);
          }
        });
        for (const l of path[0]) (leaves.get(n.name) || leaves.set(n.name, new Set()).get(n.name)).add(l);
      }
    }
    return { tiers: tiers.map((t) => [...t].sort()), up, leaves };
  }

  // A host in the fabric drawing: one rect in its tenant's colour, or on a shared host one stripe
  // per GPU in the colour of who holds it (its slots' tenants, quarantine grey).
  function hostBox(node, shared, x, y, colour) {
    const g = svg("g", { class: "fabric-host", "data-node": node.name, "data-tenant": shared ? "" : node.tenant });
    const mods = modulesOf(node);
    if (shared && mods.length) {
      const hold = holders(node, mods, true);
      const w = HOST_W / mods.length;
      mods.forEach((m, k) => {
        const h = hold.get(m);
        g.append(svg("rect", { x: x + k * w, y, width: w, height: HOST_H, class: `stripe ${colour(h.tenant)}`,
          "data-module": m, "data-tenant": h.tenant }, title(`${node.name} GPU ${m} — ${who(h)}`)));
      });
      g.append(svg("rect", { x, y, width: HOST_W, height: HOST_H, class: "host-outline" }));
    } else {
      g.append(svg("rect", { x, y, width: HOST_W, height: HOST_H, rx: 3, class: `host-rect ${colour(node.tenant)}`,
        "data-tenant": node.tenant }, title(`${node.name}: ${node.tenant}`)));
    }
    g.append(text(x + HOST_W / 2, y + HOST_H / 2 + 4, node.name, "host-label"));
    return g;
  }

  function fabric(container, nodes, kind, isShared, colour) {
    const { tiers, up, leaves } = topology(nodes, kind);
    if (!tiers.length) return false;
    const hosts = nodes.filter((n) => leaves.has(n.name));
    const firstLeaf = (n) => [...leaves.get(n.name)].sort()[0];
    hosts.sort((a, b) => (firstLeaf(a) < firstLeaf(b) ? -1 : firstLeaf(a) > firstLeaf(b) ? 1 : a.name < b.name ? -1 : 1));
    const width = Math.max(hosts.length * (HOST_W + HOST_GAP), ...tiers.map((t) => t.length * (SW_W + HOST_GAP))) + 2 * HOST_GAP;
    const height = tiers.length * ROW + HOST_H + 14;
    const root = svg("svg", { class: "fabric", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
      "data-kind": kind, "aria-label": `${kind}: ${tiers.map((t, i) => `${tierName(i)}s ${t.join(", ")}`).join("; ")}` });
    const hostY = tiers.length * ROW + 10;
    const hostX = new Map(hosts.map((n, i) => [n.name, HOST_GAP + i * (HOST_W + HOST_GAP)]));
    // leaves over the mean of their hosts, every higher tier spread over the width
    const pos = new Map();  // switch -> [cx, top y]
    tiers.forEach((sws, i) => {
      const y = (tiers.length - 1 - i) * ROW + 10;
      sws.forEach((s, k) => {
        const under = hosts.filter((n) => leaves.get(n.name).has(s)).map((n) => hostX.get(n.name) + HOST_W / 2);
        const spread = (width / (sws.length + 1)) * (k + 1);
        pos.set(s, [i === 0 && under.length ? under.reduce((a, b) => a + b, 0) / under.length : spread, y]);
      });
    });
    const lines = svg("g", { class: "links" });
    for (const [s, above] of up) for (const a of above) {
      const [x1, y1] = pos.get(s), [x2, y2] = pos.get(a);
      lines.append(svg("line", { x1, y1, x2, y2: y2 + SW_H, "data-from": s, "data-to": a }));
    }
    for (const n of hosts) for (const l of leaves.get(n.name)) {
      const [x2, y2] = pos.get(l);
      lines.append(svg("line", { x1: hostX.get(n.name) + HOST_W / 2, y1: hostY, x2, y2: y2 + SW_H, "data-from": n.name, "data-to": l }));
    }
    root.append(lines);
    tiers.forEach((sws, i) => sws.forEach((s) => {
      const [cx, y] = pos.get(s);
      root.append(svg("g", { class: "switch", "data-switch": s, "data-tier": tierName(i) },
        title(`${tierName(i)} ${s}`),
        svg("rect", { x: cx - SW_W / 2, y, width: SW_W, height: SW_H, rx: 4 }),
        text(cx, y + SW_H / 2 + 4, s, "switch-label")));
    }));
    for (const n of hosts) root.append(hostBox(n, isShared(n), hostX.get(n.name), hostY, colour));
    const fig = document.createElement("figure");
    fig.className = "fabric-fig";
    const cap = document.createElement("figcaption");
    cap.textContent = `${kind}: ${tiers.map((t, i) => `${t.length} ${tierName(i)}(s)`).join(", ")}, ${hosts.length} host(s)`;
    fig.append(cap, root);
    container.append(fig);
    return true;
  }

  function tierName(i) {
    return ["leaf", "spine", "core"][i] || `tier-${i + 1}`;
  }

  // fabrics: one drawing per port kind whose ports have a path (ethernet, infiniband, ...).
  function fabrics(container, nodes, isShared, colour) {
    container.replaceChildren();
    const kinds = [...new Set(nodes.flatMap((n) => Object.keys(n.ports || {})))].sort();
    return kinds.filter((k) => fabric(container, nodes, k, isShared, colour));
  }

  return { hosts, fabrics, modulesOf, holders };
})();
