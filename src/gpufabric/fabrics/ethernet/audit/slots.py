"""Ethernet invariants of shared hosts (issue 33, pure), on the *observed* ports of each host leased
in a shared offering (``tenancy.shared(host)``):

* ``ETH-VM-PORT-FOREIGN``: a VM port (an entry with ``gpu``, on the hypervisor's OVS) carries a
  VLAN of a tenant that holds no slot with that GPU (a GPU no slot holds: any tenant's VLAN);
* ``ETH-UPLINK-FOREIGN-VLAN``: the host's uplink trunk carries a VLAN of a tenant that holds no
  slot there and is not the host's own lease's tenant.

The quarantine VLAN is nobody's: it is never foreign here (the other invariants and ``X-DRIFT`` say
whether a port should be in it). A VLAN no network uses is foreign to every port."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Final

from gpufabric.domain.fabric import InvariantSpec, Tenancy
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.severity import Severity
from gpufabric.fabrics.ethernet.audit.isolation import ETH, fmt_vlans, vlan_owner_sets
from gpufabric.fabrics.ethernet.entries import ethernet_ports
from gpufabric.fabrics.ethernet.state import SwitchState

VM_PORT: Final = "ETH-VM-PORT-FOREIGN"
UPLINK: Final = "ETH-UPLINK-FOREIGN-VLAN"
INVARIANTS: Final = (
    InvariantSpec(VM_PORT, Severity.CRITICAL.value,
                  "A VM port of a shared host carries a VLAN of a tenant that holds no slot with that GPU."),
    InvariantSpec(UPLINK, Severity.CRITICAL.value,
                  "A shared host's uplink trunk carries a VLAN of a tenant without a slot there (nor the host's lease)."),
)  # fmt: skip


def audit(tenancy: Tenancy, observed: Iterable[SwitchState], instance: str = ETH) -> Iterator[Violation]:
    """Both invariants over every shared host's observed ports."""
    obs = {(c.switch, c.port): c for s in observed for c in s.ports}
    owners = vlan_owner_sets(tenancy, instance)
    for node in tenancy.nodes:
        if node.host or not tenancy.shared(node.name):
            continue
        host = node.name
        held = {lease.tenant for lease in tenancy.slot_leases(host)}
        for p in ethernet_ports(node, instance):
            cfg = obs.get((p.switch, p.managed_port))
            if cfg is None:
                continue  # X-DRIFT reports it
            if p.gpu is not None:
                lease = tenancy.gpu_lease(host, p.gpu)
                allowed = {lease.tenant} if lease is not None else set()
                foreign = _foreign(cfg.vlans(), allowed, owners)
                if foreign:
                    yield _v(VM_PORT, f"VM port {p.switch}/{p.managed_port} of {host} GPU {p.gpu} "
                             f"({tenancy.gpu_unit(host, p.gpu) or 'no slot'}, tenant {lease.tenant if lease else QUARANTINE}) "
                             f"carries vlan(s) {fmt_vlans(foreign)} of {_who(foreign, owners)}",
                             p.switch, p.managed_port, host, foreign, owners)  # fmt: skip
                continue
            foreign = _foreign(cfg.vlans(), {tenancy.owner(host), *held}, owners)
            if foreign:
                yield _v(UPLINK, f"uplink {p.switch}/{p.managed_port} of shared host {host} carries vlan(s) "
                         f"{fmt_vlans(foreign)} of {_who(foreign, owners)}, which hold(s) no slot there",
                         p.switch, p.managed_port, host, foreign, owners)  # fmt: skip


def _foreign(vlans: frozenset[int], allowed: set[str], owners: Mapping[int, frozenset[str]]) -> list[int]:
    return sorted(v for v in vlans if QUARANTINE not in (o := owners.get(v, frozenset())) and not o & allowed)


def _who(vlans: list[int], owners: Mapping[int, frozenset[str]]) -> str:
    return ", ".join(sorted({o for v in vlans for o in owners.get(v, frozenset({"(unowned)"}))}))


def _v(inv: str, message: str, device: str, port: str, node: str, vlans: list[int],
       owners: Mapping[int, frozenset[str]]) -> Violation:  # fmt: skip
    tenants = tuple(sorted({o for v in vlans for o in owners.get(v, ())}))
    return Violation(inv, Severity.CRITICAL, message, ETH, device, port, node, tenants, f"vlan:{fmt_vlans(vlans)}")
