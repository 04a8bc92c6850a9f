"""Ironic's own networks are gpufabric's quarantine (issue 34 item 3).

Ironic binds a node's ports to its provisioning, cleaning, rescuing or inspection network
(ironic.conf ``[neutron] *_network``, named to the driver by ``ironic_networks``) between
tenants. gpufabric's quarantine is that place: a bind on one of these networks moves the node
to quarantine on EVERY fabric gpufabric manages (InfiniBand partitions and NVLink included,
which Ironic knows nothing of) by ending its active lease (a move, verified on each fabric);
a node already there stays. These networks are never gpufabric networks.

With ``ironic_url`` set, a TENANT bind first asks Ironic the node's ``provision_state``: a
node Ironic still cleans (:data:`CLEANING`) is refused with one line naming the node and
the state. Stdlib only (it runs in Neutron's venv)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from gpufabric_neutron import client as gf

CLEANING = frozenset({"cleaning", "clean wait", "clean hold", "clean failed"})
"""Ironic provision states of a node being cleaned: no tenant network joins it then."""
API_VERSION = "1.88"


def is_ironics(net: Mapping[str, Any], networks: frozenset[str]) -> bool:
    """Whether ``net`` is one of Ironic's networks (by id or by name, as ironic.conf names it)."""
    return bool(networks) and (net.get("id") in networks or net.get("name") in networks)


class IronicNodes:
    """Ironic's node API, read only: ``GET /v1/nodes/{uuid}`` (noauth, or a Keystone token
    read from ``token_file``; https verified unless ``insecure``)."""

    def __init__(self, url: str, token: str | None = None, *, ca_file: str | None = None, insecure: bool = False,
                 timeout: float = 10.0) -> None:  # fmt: skip
        self.base = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.opener = gf.opener(gf.transport(url, "ironic", "Keystone token", ca_file, insecure))

    def provision_state(self, uuid: str) -> str | None:
        """The node's ``provision_state``; None when Ironic has no such node (404)."""
        headers = {"Accept": "application/json", "X-OpenStack-Ironic-API-Version": API_VERSION}
        if self.token:
            headers["X-Auth-Token"] = self.token
        path = f"/v1/nodes/{urllib.parse.quote(uuid, safe='')}?fields=provision_state"
        try:
            with self.opener.open(urllib.request.Request(self.base + path, headers=headers), timeout=self.timeout) as r:
                state = json.loads(r.read()).get("provision_state")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise gf.ApiError(e.code, e.read().decode(errors="replace")[:300], "GET", "ironic " + path) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            raise gf.Unreachable(f"GET {self.base}{path}: {e}") from None
        return str(state) if state is not None else None


def cleaning(node: str, host: str, state: str | None) -> str | None:
    """The one-line refusal of a tenant join while Ironic cleans ``node``, or None."""
    if state not in CLEANING:
        return None
    return (f"node {node} (Ironic node {host}) is in Ironic provision_state {state!r}: a tenant network joins "
            "it once Ironic has cleaned it")  # fmt: skip


def quarantine(c: gf.GpufabricClient, node: str, timeout: float, interval: float,
               clock: Callable[[], float] | None = None) -> bool:  # fmt: skip
    """``node`` to quarantine on every fabric: its active lease ended (a move gpufabric
    verifies on each fabric) and waited for; True when a lease was ended, False when the node
    was there already. A move under way is waited for first; MoveFailed past ``timeout``."""
    now = clock or c.clock
    deadline = now() + timeout
    q = urllib.parse.urlencode({"node": node, "state": "active"})
    while True:
        leases = (c.request("GET", f"/leases?{q}") or {}).get("items", [])
        if leases:
            try:
                ended = c.request("DELETE", f"/leases/{int(leases[0]['id'])}")
            except gf.ApiError as e:
                if c.wait_open_move(e, max(deadline - now(), 0.1), interval):
                    continue
                if e.status == 404:  # ended meanwhile (a retry, the esi-leap sync): look again
                    continue
                raise
            move = ended.get("move") if isinstance(ended, dict) else None
            if move:
                c.wait_move(move, max(deadline - now(), 0.1), interval)
            return True
        info = c.node(node) or {}
        if info.get("tenant") in (None, "quarantine"):
            return False
        if now() >= deadline:  # held, no active lease: a move under way that did not end
            raise gf.MoveFailed(info, f"node {node} still in {info.get('tenant')} after {timeout:g}s, no lease to end")
        c.sleep(interval)
