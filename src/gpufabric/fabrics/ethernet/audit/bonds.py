"""Ethernet bonds' own audit invariants (pure): what only a bond can get wrong.

A bonded NIC (``EthernetPort.bond``) is a member of its switch's aggregate interface
(port-channel, ``ae``, OVS bond); plans set the VLANs on the aggregate only (plan.py), and
quarantine shuts the aggregate as a whole. On a switch that reports members (the CLI
dialects read a member of ``channel-group N`` with its channel's VLANs), a member whose VLANs
differ from its aggregate's carries traffic of its own. The halves of an MLAG/vPC bond sit on
two switches: both must carry exactly the same VLANs. A member the switch reports outside its
aggregate (no ``channel-group``, or another channel's) is not in the bond at all; one read in a
channel the switch does not have is said so (the plan leaves it as read, and refuses only a plan
that gives its node's bond a tenant's VLAN: that node's move fails alone). A member shut down while its
aggregate carries VLANs is reported as down (the plan brings it up), not as a member carrying
VLANs of its own: a shut port carries none.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufabric.domain.fabric import InvariantSpec, Tenancy
from gpufabric.domain.findings import Violation
from gpufabric.domain.severity import Severity
from gpufabric.fabrics.ethernet.entries import KIND, EthernetPort, ethernet_ports
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState, same_aggregate

MEMBER_ID = "ETH-BOND-MEMBER-VLAN"
SPLIT_ID = "ETH-BOND-SPLIT"
OUT_ID = "ETH-BOND-MEMBER-OUT"
DOWN_ID = "ETH-BOND-MEMBER-DOWN"
INVARIANTS = (
    InvariantSpec(MEMBER_ID, Severity.CRITICAL.value,
                  "a bond member carries exactly its aggregate's VLANs, none of its own"),
    InvariantSpec(SPLIT_ID, Severity.HIGH.value,
                  "both switches of an MLAG/vPC bond carry the same VLANs on the bond's aggregates"),
    InvariantSpec(OUT_ID, Severity.HIGH.value,
                  "a bond member the switch reports is in its inventory aggregate, not outside it or in another"),
    InvariantSpec(DOWN_ID, Severity.MEDIUM.value,
                  "a bond member is up while its aggregate carries VLANs (the bond runs on all its links)"),
)  # fmt: skip


def _vlans(c: EthernetPortConfig | None) -> str:
    return ",".join(str(v) for v in sorted(c.vlans())) or "none" if c is not None else "unread"


def audit(tenancy: Tenancy, observed: tuple[SwitchState, ...], instance: str = KIND) -> Iterator[Violation]:
    seen = {s.switch: s for s in observed}

    def cfg(switch: str, port: str) -> EthernetPortConfig | None:
        sw = seen.get(switch)
        return sw.port(port) if sw is not None else None

    for node in tenancy.nodes:
        bonds: dict[str, list[EthernetPort]] = {}
        for p in ethernet_ports(node, instance):
            if p.bond:
                bonds.setdefault(p.bond, []).append(p)
        for bond, members in sorted(bonds.items()):
            aggregates = {m.switch: cfg(m.switch, bond) for m in members}
            for m in members:
                agg, own = aggregates[m.switch], cfg(m.switch, m.switch_port)
                if own is not None and not same_aggregate(own.bond, bond):
                    where = f"in {own.bond}" if own.bond else "outside any aggregate"
                    sw = seen[m.switch]
                    if own.bond and not any(same_aggregate(p.port, own.bond) for p in sw.ports):
                        where += f", which {m.switch} does not have"
                    yield Violation(
                        OUT_ID, Severity.HIGH,
                        f"{node.name} {m.name}: member {m.switch}/{m.switch_port} is {where}, not in {bond}",
                        fabric="ethernet", device=m.switch, port=m.switch_port, node=node.name, resource=f"bond:{bond}",
                    )  # fmt: skip
                shut = own is not None and own.mode is PortMode.SHUTDOWN
                if own is not None and shut and same_aggregate(own.bond, bond) and agg is not None and agg.vlans():
                    yield Violation(
                        DOWN_ID, Severity.MEDIUM,
                        f"{node.name} {m.name}: member {m.switch}/{m.switch_port} of {bond} is shut down, "
                        f"its aggregate carries VLANs {_vlans(agg)}",
                        fabric="ethernet", device=m.switch, port=m.switch_port, node=node.name, resource=f"bond:{bond}",
                    )  # fmt: skip
                if own is not None and agg is not None and not shut and own.vlans() != agg.vlans():
                    yield Violation(
                        MEMBER_ID, Severity.CRITICAL,
                        f"{node.name} {m.name}: member {m.switch}/{m.switch_port} carries VLANs {_vlans(own)}, "
                        f"its aggregate {bond} carries {_vlans(agg)}",
                        fabric="ethernet", device=m.switch, port=m.switch_port, node=node.name, resource=f"bond:{bond}",
                    )  # fmt: skip
            read = {sw: c for sw, c in aggregates.items() if c is not None}
            if len(read) == 2 and len({frozenset(c.vlans()) for c in read.values()}) == 2:
                (a, ca), (b, cb) = sorted(read.items())
                yield Violation(
                    SPLIT_ID, Severity.HIGH,
                    f"{node.name} bond {bond}: {a} carries VLANs {_vlans(ca)}, {b} carries {_vlans(cb)}",
                    fabric="ethernet", device=f"{a},{b}", port=bond, node=node.name, resource=f"bond:{bond}",
                )  # fmt: skip
