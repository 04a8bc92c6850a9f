"""Mirror esi-leap lessees into gpufabric: ``gpufabric-esi-leap-sync``.

Polls esi-leap's event feed (``GET /v1/events?last_event_id=N``, the feed esi-leap writes
whenever the manager fulfils, expires or cancels a lease) and mirrors each lease change
into gpufabric over its API v1:

- ``esi_leap.lease.fulfill.end`` (node handed to the lessee): gpufabric leases the node to
  the lessee's tenant (``POST /leases`` with ``"networks": []``, meaning NO networks: the
  node's ports stay shut until the lessee's Neutron binds attach its networks one by one;
  the sync never relies on an empty list meaning "all the tenant's networks"), waits for
  the move that grants it and until ``GET /nodes/{node}`` shows the tenant. A node still
  held by another gpufabric tenant is released first (its active lease ended).
- ``esi_leap.lease.delete.end`` (expiry or cancel): gpufabric ends the node's active lease
  (``DELETE /leases/{id}``: a move to quarantine, verified on every fabric) and waits for the
  move, even before Ironic tears the node down and Neutron unbinds its ports. Skipped when
  gpufabric already has the node in quarantine or in another tenant (a newer lease won).

It acts with a gpufabric ``service`` token (creates tenants, grants and ends leases, reads
nodes, leases and moves), not admin: it never requests moves itself.

The last event id read is kept in a state file, so a restart resumes where it stopped; of a
batch only each node's latest lease event is applied, and handlers are idempotent, so a
replay changes nothing. Events of other
resource types, and nodes gpufabric does not know, are logged and skipped.

Nodes: esi-leap names a node by its resource UUID; ``--node-map`` (JSON ``{uuid: name}``)
maps it to gpufabric's node name, else the UUID is used as the name. Tenants: the lessee's
project id, as the ML2 driver names them (:func:`gpufabric_neutron.names.tenant_name`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufabric_neutron import client as gf
from gpufabric_neutron.names import tenant_name

LOG = logging.getLogger("gpufabric_neutron.esi_leap")
QUARANTINE = "quarantine"
FULFILL = "esi_leap.lease.fulfill.end"
DELETE = "esi_leap.lease.delete.end"


class EsiLeap:
    """esi-leap's event feed (with a Keystone token, or headers when its auth is disabled).

    ``https://`` only (verified against ``ca_file`` or the system CAs) unless ``insecure``
    (logged ``TRANSPORT-INSECURE``), and no redirect followed: the Keystone token goes to
    ``url``'s origin and nowhere else (:func:`gpufabric_neutron.client.transport`)."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, timeout: float = 10.0, *,
                 ca_file: str | None = None, insecure: bool = False) -> None:  # fmt: skip
        self.url = url.rstrip("/")
        self.headers = {"Accept": "application/json", **(headers or {})}
        self.timeout = timeout
        self.opener = gf.opener(gf.transport(url, "esi-leap", "Keystone token", ca_file, insecure))

    def events(self, last_event_id: int) -> list[dict[str, Any]]:
        q = urllib.parse.urlencode({"last_event_id": last_event_id})
        req = urllib.request.Request(f"{self.url}/v1/events?{q}", headers=self.headers)
        with self.opener.open(req, timeout=self.timeout) as r:
            body = json.loads(r.read())
        events = [e for e in body.get("events", []) if int(e.get("id", 0)) > last_event_id]
        return sorted(events, key=lambda e: int(e["id"]))


@dataclass
class Mirror:
    esi: EsiLeap
    gpufabric: gf.GpufabricClient
    state_file: Path
    node_map: dict[str, str] = field(default_factory=dict)
    timeout: float = 300.0
    interval: float = 1.0
    resource_types: tuple[str, ...] = ("ironic_node", "dummy_node")
    handled: list[tuple[int, str, str]] = field(default_factory=list)  # (event id, action, node) for reports

    @property
    def last_event_id(self) -> int:
        try:
            return int(json.loads(self.state_file.read_text())["last_event_id"])
        except (FileNotFoundError, KeyError, ValueError):
            return 0

    def _save(self, event_id: int) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"last_event_id": event_id}))
        os.replace(tmp, self.state_file)

    def run_once(self) -> int:
        """Handle the new events; returns how many were read. Only each node's latest lease
        event counts (the state it leaves the node in), so a replay from an older event id
        never hands a node back to an earlier lessee even briefly. An error stops the pass
        and propagates; the batch is read again next pass (handlers are idempotent)."""
        events = self.esi.events(self.last_event_id)
        latest: dict[str, dict[str, Any]] = {}
        for ev in events:
            if ev.get("event_type") in (FULFILL, DELETE) and ev.get("object_type", "lease") == "lease":
                latest[str(ev.get("resource_uuid"))] = ev
        for ev in sorted(latest.values(), key=lambda e: int(e["id"])):
            self.handle(ev)
        if events:
            self._save(max(int(e["id"]) for e in events))
        return len(events)

    def handle(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event_type")
        if kind not in (FULFILL, DELETE) or ev.get("object_type", "lease") != "lease":
            return
        if ev.get("resource_type") not in self.resource_types:
            LOG.info("event %s: resource type %s is not a node, skipped", ev["id"], ev.get("resource_type"))
            return
        node = self.node_map.get(ev["resource_uuid"], ev["resource_uuid"])
        try:
            current = self.gpufabric.request("GET", f"/nodes/{urllib.parse.quote(node, safe='')}")
        except gf.ApiError as e:
            if e.status == 404:
                LOG.warning("event %s: node %s (%s) is unknown to gpufabric, skipped", ev["id"], node, ev["resource_uuid"])
                return
            raise
        if kind == FULFILL:
            self._lease(ev, node, tenant_name(ev["lessee_id"]), current)
        else:
            self._release(ev, node, tenant_name(ev["lessee_id"]) if ev.get("lessee_id") else None, current)

    def _lease(self, ev: dict[str, Any], node: str, tenant: str, current: dict[str, Any]) -> None:
        if current.get("tenant") == tenant:
            return  # already (a replayed event, or Neutron attached it first)
        if current.get("tenant") not in (None, QUARANTINE):
            LOG.warning("event %s: node %s is held by %s in gpufabric; releasing it for lessee %s", ev["id"], node,
                        current.get("tenant"), tenant)  # fmt: skip
            self._quarantine(node)
        self.gpufabric.ensure_tenant(tenant)
        try:  # explicitly no networks: the lessee's Neutron binds attach them
            move = self.gpufabric.request("POST", "/leases", {"tenant": tenant, "node": node, "networks": []})
        except gf.ApiError as e:
            if e.status != 409:
                raise
        else:
            if isinstance(move, dict) and move.get("id") is not None and "status" in move:
                self.gpufabric.wait_move(move, self.timeout, self.interval)
        self._wait_tenant(node, tenant)
        self.handled.append((int(ev["id"]), "lease", node))
        LOG.info("event %s: node %s leased to %s (esi-leap lease %s)", ev["id"], node, tenant, ev.get("object_uuid"))

    def _release(self, ev: dict[str, Any], node: str, tenant: str | None, current: dict[str, Any]) -> None:
        holder = current.get("tenant")
        if holder in (None, QUARANTINE):
            return
        if tenant is not None and holder != tenant:
            LOG.info("event %s: node %s is now %s's, not %s's: left alone", ev["id"], node, holder, tenant)
            return
        self._quarantine(node)
        self.handled.append((int(ev["id"]), "release", node))
        LOG.info("event %s: node %s released to quarantine (esi-leap lease %s ended)", ev["id"], node, ev.get("object_uuid"))

    def _quarantine(self, node: str) -> None:
        """End the node's active lease (its release to quarantine) and wait for the move."""
        q = urllib.parse.urlencode({"node": node, "state": "active"})
        for attempt in range(3):
            leases = (self.gpufabric.request("GET", f"/leases?{q}") or {}).get("items", [])
            if not leases:
                raise gf.MoveFailed({}, f"node {node} is held in gpufabric but has no active lease to end (a move "
                                        "under way?): retried next pass")  # fmt: skip
            try:
                ended = self.gpufabric.request("DELETE", f"/leases/{int(leases[0]['id'])}")
            except gf.ApiError as e:
                if attempt < 2 and self.gpufabric.wait_open_move(e, self.timeout, self.interval):
                    continue
                raise
            move = ended.get("move") if isinstance(ended, dict) else None
            if move:
                self.gpufabric.wait_move(move, self.timeout, self.interval)
            return

    def _wait_tenant(self, node: str, tenant: str) -> None:
        deadline = self.gpufabric.clock() + self.timeout
        while True:
            cur = self.gpufabric.request("GET", f"/nodes/{urllib.parse.quote(node, safe='')}")
            if cur.get("tenant") == tenant:
                return
            if self.gpufabric.clock() >= deadline:
                raise gf.MoveFailed(cur, f"node {node} not in tenant {tenant} after {self.timeout:g}s (now {cur.get('tenant')})")
            self.gpufabric.sleep(self.interval)


def main(argv: list[str] | None = None, sleep: Callable[[float], None] = time.sleep) -> int:
    ap = argparse.ArgumentParser(prog="gpufabric-esi-leap-sync", description=__doc__.split("\n\n")[0])
    ap.add_argument("--esi-leap-url", required=True)
    ap.add_argument("--esi-leap-token-file", help="Keystone token for esi-leap (omit when its auth is disabled)")
    ap.add_argument("--esi-leap-header", action="append", default=[], help="extra header NAME:VALUE (e.g. X-Roles:admin)")
    ap.add_argument("--gpufabric-url", required=True)
    ap.add_argument("--token-file", required=True, help="gpufabric bearer token (mode 0600)")
    ap.add_argument("--ca-file", help="CA bundle that signed gpufabric's certificate")
    ap.add_argument("--esi-leap-ca-file", help="CA bundle that signed esi-leap's certificate")
    ap.add_argument("--insecure", action="store_true",
                    help="allow an http:// gpufabric or esi-leap url, or an unverified certificate (testing only; "
                         "logged as TRANSPORT-INSECURE)")  # fmt: skip
    ap.add_argument("--node-map", help="JSON file {esi-leap resource uuid: gpufabric node name}")
    ap.add_argument("--state-file", default="/var/lib/gpufabric/esi-leap-sync.json")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between polls")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for gpufabric to apply a change")
    ap.add_argument("--once", action="store_true", help="one pass, then exit")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    headers = dict(h.split(":", 1) for h in a.esi_leap_header)
    if a.esi_leap_token_file:
        headers["X-Auth-Token"] = gf.read_token(a.esi_leap_token_file)
    try:
        esi = EsiLeap(a.esi_leap_url, headers, ca_file=a.esi_leap_ca_file, insecure=a.insecure)
        client = gf.GpufabricClient(a.gpufabric_url, gf.read_token(a.token_file), ca_file=a.ca_file, insecure=a.insecure)
    except gf.InsecureTransport as e:
        ap.error(str(e))
    mirror = Mirror(
        esi,
        client,
        Path(a.state_file),
        json.loads(Path(a.node_map).read_text()) if a.node_map else {},
        timeout=a.timeout,
    )
    while True:
        try:
            n = mirror.run_once()
            if n:
                LOG.info("handled %d event(s); last event id %d", n, mirror.last_event_id)
        except Exception as e:  # report and retry next poll: the failed event is not marked handled
            LOG.error("pass failed (retried next poll): %s", e)
            if a.once:
                return 1
        if a.once:
            return 0
        sleep(a.interval)


if __name__ == "__main__":
    sys.exit(main())
