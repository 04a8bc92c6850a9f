"""A loopback stand-in for gpufabric's API v1, speaking the same contract (paths, bearer
token, JSON error body, 202 moves that are polled) with in-memory state.

Used by the driver's unit tests and as the contract server when verifying against a real
Neutron before gpufabric's own API is available. Knobs: ``move_polls`` (GETs before a move is
done), ``fail_moves`` (moves end failed), ``hang_moves`` (never finish), ``down`` (answers
nothing: connection refused, as while gpufabric restarts). The token is a ``service`` token
(as the integrations get): requesting moves (``POST /moves``) or importing inventory is 403.
As the server is meant to (issue 18): an attachment never takes a node another tenant holds
(409), and a lease's network list is taken literally (empty: no networks).

Fabric instances (issue 20): ``state.instances`` {instance: (kind, seg-id range, PKey base)}
(default: one ``ethernet`` and one ``infiniband``); a segment names its instance in ``fabric``
(as ``GET /networks`` shows segments), its id is checked against that instance's range and is
unique per instance; ``state.guid_instance`` puts an HCA port on an IB instance (default
``infiniband``), and ``GET /nodes/{name}`` lists each IB instance's ports under
``fabrics.<instance>.ports`` as gpufabric does. Adopting a segment on a non-default instance
(what the driver sends for a second subnet) is the server's contract too (``SegmentIn.fabric``
is an instance name, ``FabricKind.adopt``); unlike the server, the fake keeps ids unique per
instance, not per kind.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ETH_RANGE = range(2000, 3000)
IB_RANGE = range(3000, 4000)
PKEY_BASE = 0x0A00


def _err(status: int, code: str, message: str, field: str | None = None, value: Any = None, allowed: Any = None) -> tuple[int, Any]:
    return status, {"error": {"code": code, "field": field, "value": value, "allowed": allowed, "message": message}}


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tenants: set[str] = set()
        self.networks: dict[str, dict[str, Any]] = {}
        self.switch_ports: dict[tuple[str, str], str] = {}
        self.guids: dict[str, str] = {}
        self.attachments: dict[str, set[str]] = {}  # node -> networks
        self.moves: dict[int, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.move_polls = 1
        self.fail_moves = False
        self.hang_moves = False
        self.converge_fails = False
        self.node_tenant: dict[str, str] = {}
        self.leases: list[dict[str, Any]] = []
        self.instances: dict[str, tuple[str, range, int]] = {"ethernet": ("ethernet", ETH_RANGE, 0),
                                                              "infiniband": ("infiniband", IB_RANGE, PKEY_BASE)}
        self.guid_instance: dict[str, str] = {}
        self.host_ids: dict[str, str] = {}  # host id (Ironic's node UUID) -> node, as inventory import --from ironic stores it
        self.worker = {"name": "worker", "alive": True, "passes": 0, "errors": 0, "last_error": ""}

    def pkey(self, seg: dict[str, Any]) -> int | None:
        kind, rng, base = self.instances[seg["fabric"]]
        return base + seg["seg_id"] - rng.start if kind == "infiniband" else None


class FakeGpufabric:
    def __init__(self, token: str = "s3cret") -> None:
        self.token = token
        self.state = State()
        self.httpd: ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeGpufabric:
        handler = _handler(self)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    # ---- contract
    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        s = self.state
        p = [urllib.parse.unquote(x) for x in path.removeprefix("/api/v1/").split("/")]
        with s.lock:
            s.requests.append((method, path, body))
            if method == "POST" and p == ["tenants"]:
                if body["name"] in s.tenants:
                    return _err(409, "conflict", f"tenant already exists: {body['name']}", "name", body["name"])
                s.tenants.add(body["name"])
                return 201, {"name": body["name"]}
            if method == "POST" and p == ["networks"]:
                return self._create_network(body)
            if method == "GET" and p == ["reconcile"]:
                return 200, {"loops": [dict(s.worker)], "last": None}
            if method == "GET" and p[0] == "networks" and len(p) == 3:
                net = s.networks.get(p[2])
                if net is None or net["tenant"] != p[1]:
                    return _err(404, "not_found", f"network not found: {p[1]}/{p[2]}")
                return 200, net
            if method == "PATCH" and p[0] == "networks" and len(p) == 3:
                net = s.networks.get(p[2])
                if net is None or net["tenant"] != p[1]:
                    return _err(404, "not_found", f"network not found: {p[1]}/{p[2]}")
                net.update({k: v for k, v in body.items() if k in ("description", "tags")})
                return 200, net
            if method == "DELETE" and p[0] == "networks" and len(p) == 3:
                net = s.networks.get(p[2])
                if net is None or net["tenant"] != p[1]:
                    return _err(404, "not_found", f"network not found: {p[2]}")
                if any(p[2] in nets for nets in s.attachments.values()):
                    return _err(409, "conflict", f"network {p[2]} has nodes attached")
                del s.networks[p[2]]
                return 200, net
            if method == "GET" and p == ["ports", "lookup"]:
                node = s.guids.get(query.get("guid", "")) or s.switch_ports.get((query.get("switch", ""), query.get("port", "")))
                return (200, {"node": node}) if node else _err(404, "not_found", f"no node has port {query}")
            if method == "GET" and p == ["nodes"] and "host_id" in query:  # the driver's lookup of binding:host_id
                found = s.host_ids.get(query["host_id"])
                items = [dict(self._node(found), host_id=query["host_id"])] if found else []
                return 200, {"items": items, "total": len(items), "limit": 100, "offset": 0}
            if method == "GET" and p[0] == "nodes" and len(p) == 2:
                if p[1] not in set(s.switch_ports.values()) | set(s.guids.values()):
                    return _err(404, "not_found", f"node not found: {p[1]}", "node", p[1])
                return 200, self._node(p[1])
            if method == "POST" and p == ["leases"]:
                return self._lease(body)
            if method == "GET" and p == ["leases"]:
                items = [x for x in s.leases if x["node"] == query.get("node", x["node"])
                         and (query.get("state") != "active" or x["active"])]  # fmt: skip
                return 200, {"items": items, "total": len(items), "limit": 100, "offset": 0}
            if method == "DELETE" and p[0] == "leases" and len(p) == 2:
                return self._end_lease(int(p[1]))
            if method == "POST" and p in (["moves"], ["inventory"]):
                return _err(403, "forbidden", f"role service may not create {p[0]}", "role", "service", "admin")
            if p[0] == "nodes" and len(p) >= 3 and p[2] == "attachments":
                return self._attachment(method, p, body)
            if method == "GET" and p[0] == "moves" and len(p) == 2:
                m = s.moves.get(int(p[1]))
                if m is None:
                    return _err(404, "not_found", f"move not found: {p[1]}")
                m["polls"] += 1
                if m["status"] in ("pending", "running") and not s.hang_moves and m["polls"] >= s.move_polls:
                    self._finish(m)
                return 200, {k: v for k, v in m.items() if k != "polls"}
        return _err(404, "not_found", f"no route {method} {path}")

    def _create_network(self, body: dict[str, Any]) -> tuple[int, Any]:
        s = self.state
        if body["tenant"] not in s.tenants:
            return _err(404, "not_found", f"tenant not found: {body['tenant']}", "tenant", body["tenant"])
        if body["name"] in s.networks:
            return _err(409, "conflict", f"network already exists: {body['name']}", "name", body["name"])
        for seg in body["segments"]:
            if seg["fabric"] not in s.instances:
                return _err(422, "invalid", f"no fabric instance {seg['fabric']}", "segments.fabric", seg["fabric"],
                            ", ".join(sorted(s.instances)))  # fmt: skip
            _, rng, _ = s.instances[seg["fabric"]]
            if seg["seg_id"] not in rng:
                return _err(422, "invalid", f"{seg['fabric']} seg_id {seg['seg_id']} is outside {rng.start}-{rng.stop - 1}",
                            f"{seg['fabric']}.seg_id", seg["seg_id"], f"{rng.start}-{rng.stop - 1}")  # fmt: skip
            for other in s.networks.values():
                if any((o["fabric"], o["seg_id"]) == (seg["fabric"], seg["seg_id"]) for o in other["segments"]):
                    return _err(409, "conflict", f"segment {seg} is used by {other['name']}", "segments", seg)
        net = {"name": body["name"], "tenant": body["tenant"], "segments": [
            {**seg, "vlan": seg["seg_id"] if s.instances[seg["fabric"]][0] == "ethernet" else None,
             "pkey": None if s.pkey(seg) is None else f"0x{s.pkey(seg):04x}"} for seg in body["segments"]]}  # fmt: skip
        s.networks[body["name"]] = net
        return 201, net

    def _node(self, node: str) -> dict[str, Any]:
        s = self.state
        eth = [{"name": f"eth{i}", "switch": sw, "switch_port": port, "mac": ""}
               for i, ((sw, port), n) in enumerate(sorted(s.switch_ports.items())) if n == node]  # fmt: skip
        ib = [{"device": "mlx5_0", "port_num": 1, "port_guid": g, "node_guid": g, "switch_guid": None, "switch_port": None}
              for g, n in sorted(s.guids.items()) if n == node]  # fmt: skip
        lease = next((x["id"] for x in s.leases if x["node"] == node and x["active"]), None)
        views = {inst: {"summary": "", "ports": [p for p in ib if s.guid_instance.get(p["port_guid"], "infiniband") == inst]}
                 for inst, (kind, _, _) in s.instances.items() if kind == "infiniband"}  # fmt: skip
        return {"name": node, "offering": "baremetal", "state": "leased" if lease else "available", "owner": None,
                "tenant": s.node_tenant.get(node, "quarantine"), "lease": lease,
                "ports": {"ethernet": eth, "infiniband": ib}, "fabrics": views}  # fmt: skip

    def _attachment(self, method: str, p: list[str], body: Any) -> tuple[int, Any]:
        s = self.state
        node = p[1]
        known = set(s.switch_ports.values()) | set(s.guids.values())
        if node not in known:
            return _err(404, "not_found", f"node not found: {node}", "node", node)
        nets = s.attachments.setdefault(node, set())
        if method == "POST":
            if body["network"] not in s.networks:
                return _err(404, "not_found", f"network not found: {body['network']}", "network", body["network"])
            holder = s.node_tenant.get(node, "quarantine")
            if holder not in ("quarantine", body["tenant"]):
                return _err(409, "conflict", f"node {node} is leased to another tenant", "node", node)
            if holder == body["tenant"] and nets:
                if body["network"] in nets:
                    return _err(409, "conflict", f"node {node} is already attached to {body['tenant']}/{body['network']}")
                nets.add(body["network"])
                return 202, {"node": node, "move": None, "lease": self._converge(node)}
            return self._new_move(node, "attach", body["network"], body["tenant"])
        if method == "DELETE" and len(p) == 4:
            if p[3] not in nets:
                return _err(404, "not_found", f"attachment not found: {node}/{p[3]}", "attachment", f"{node}/{p[3]}")
            if nets - {p[3]}:
                nets.discard(p[3])
                return 202, {"node": node, "move": None, "lease": self._converge(node)}
            return self._new_move(node, "detach", p[3], None)
        return _err(405, "invalid", "method not allowed")

    def _lease(self, body: dict[str, Any]) -> tuple[int, Any]:
        """As gpufabric: 202 and the move from quarantine that grants the lease when it is done."""
        s = self.state
        if body["tenant"] not in s.tenants:
            return _err(404, "not_found", f"tenant not found: {body['tenant']}", "tenant", body["tenant"])
        if s.node_tenant.get(body["node"], "quarantine") != "quarantine":
            return _err(409, "conflict", f"node {body['node']} is leased to {s.node_tenant[body['node']]}")
        status, out = self._new_move(body["node"], "lease", "", body["tenant"], list(body.get("networks", [])))
        return (status, out["move"]) if status == 202 else (status, out)

    def _end_lease(self, lease_id: int) -> tuple[int, Any]:
        s = self.state
        lease = next((x for x in s.leases if x["id"] == lease_id), None)
        if lease is None:
            return _err(404, "not_found", f"lease not found: {lease_id}", "lease", lease_id)
        if not lease["active"]:
            return 202, {"lease": lease, "move": None}
        status, out = self._new_move(lease["node"], "release", "", None)
        return (status, {"lease": lease, "move": out["move"]}) if status == 202 else (status, out)

    def _converge(self, node: str) -> dict[str, Any]:
        """Same-tenant change: the worker's next passes converge it (or fail, with converge_fails)."""
        w = self.state.worker
        if self.state.converge_fails:
            w.update(errors=w["errors"] + 1, last_error="converge: verify failed on ovs")
        w["passes"] += 2
        lease = next((x for x in self.state.leases if x["node"] == node and x["active"]), None)
        if lease is not None:
            lease["networks"] = sorted(self.state.attachments[node])
        return {"id": lease["id"] if lease else 1, "tenant": self.state.node_tenant.get(node), "node": node,
                "networks": sorted(self.state.attachments[node]), "active": True}  # fmt: skip

    def _new_move(self, node: str, kind: str, network: str, tenant: str | None,
                  networks: list[str] | None = None) -> tuple[int, Any]:  # fmt: skip
        s = self.state
        for m in s.moves.values():
            if m["node"] == node and m["status"] in ("pending", "running"):
                return _err(409, "conflict", f"node {node} already has open move {m['id']} ({m['status']} at {m['phase']})")
        mid = len(s.moves) + 1
        m = {"id": mid, "node": node, "kind": kind, "network": network, "tenant": tenant, "status": "pending",
             "from_tenant": s.node_tenant.get(node, "quarantine"), "to_tenant": tenant or "quarantine",
             "networks": networks if networks is not None else [network] if tenant else [], "phase": "quarantine",
             "error": "", "polls": 0}  # fmt: skip
        s.moves[mid] = m
        return 202, {"node": node, "move": {k: v for k, v in m.items() if k != "polls"}, "lease": None}

    def _finish(self, m: dict[str, Any]) -> None:
        if self.state.fail_moves:
            m.update(status="failed", error="verify: port still on VLAN 4000")
            return
        s = self.state
        for lease in s.leases:
            if lease["node"] == m["node"] and lease["active"]:
                lease["active"] = False
        if m["tenant"]:  # attach or lease: a new lease in the tenant with the move's networks
            s.attachments[m["node"]] = set(m["networks"])
            s.node_tenant[m["node"]] = m["tenant"]
            s.leases.append({"id": len(s.leases) + 1, "tenant": m["tenant"], "node": m["node"],
                             "networks": list(m["networks"]), "active": True})  # fmt: skip
        else:
            s.attachments[m["node"]] = set()
            s.node_tenant[m["node"]] = "quarantine"
        m.update(status="done", phase="done")


def _handler(fake: FakeGpufabric) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def _go(self, method: str) -> None:
            if self.headers.get("Authorization") != f"Bearer {fake.token}":
                status, body = _err(401, "unauthorized", "missing or wrong bearer token")
            else:
                u = urllib.parse.urlsplit(self.path)
                n = int(self.headers.get("Content-Length") or 0)
                data = json.loads(self.rfile.read(n)) if n else None
                status, body = fake.handle(method, u.path, dict(urllib.parse.parse_qsl(u.query)), data)
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            self._go("GET")

        def do_POST(self) -> None:
            self._go("POST")

        def do_DELETE(self) -> None:
            self._go("DELETE")

        def do_PATCH(self) -> None:
            self._go("PATCH")

    return H


if __name__ == "__main__":  # a contract server for manual runs and the real-Neutron contract test
    import argparse
    import time

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--seed", help='JSON file: {"switch_ports": [[switch, port, node]], "guids": {guid: node}, '
                    '"instances": {name: [kind, first seg id, last seg id, PKey base]}, "guid_instance": {guid: name}, "host_ids": {host id: node}}')
    ap.add_argument("--state-out", help="write the state as JSON to this file after every request")
    a = ap.parse_args()
    f = FakeGpufabric(Path(a.token_file).read_text().strip())
    f.port = a.port
    if a.seed:
        seed = json.loads(Path(a.seed).read_text())
        f.state.switch_ports.update({(sw, p): n for sw, p, n in seed.get("switch_ports", [])})
        f.state.guids.update(seed.get("guids", {}))
        f.state.instances.update({n: (k, range(a, b + 1), base) for n, (k, a, b, base) in seed.get("instances", {}).items()})
        f.state.guid_instance.update(seed.get("guid_instance", {}))
        f.state.host_ids.update(seed.get("host_ids", {}))
    if a.state_out:
        inner = f.handle

        def handle_and_dump(*args: Any) -> tuple[int, Any]:
            r = inner(*args)
            st = f.state
            with st.lock:
                dump = {"networks": st.networks, "attachments": {k: sorted(v) for k, v in st.attachments.items()},
                        "node_tenant": st.node_tenant, "leases": st.leases,
                        "writes": [[m, path] for m, path, _ in st.requests if m != "GET"],
                        "moves": list(st.moves.values()), "tenants": sorted(st.tenants)}  # fmt: skip
            tmp = f"{a.state_out}.{threading.get_ident()}.tmp"
            with open(tmp, "w") as out:
                json.dump(dump, out)
            __import__("os").replace(tmp, a.state_out)
            return r

        f.handle = handle_and_dump  # type: ignore[method-assign]
    f.start()
    print(f"fake gpufabric on {f.url}", flush=True)
    while True:
        time.sleep(3600)
