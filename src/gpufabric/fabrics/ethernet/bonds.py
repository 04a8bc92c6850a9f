"""Ethernet bonds' own audit invariants (pure): what only a bond can get wrong.

A bonded NIC (``EthernetPort.bond``) is a member of its switch's aggregate interface
(port-channel, ``ae``, OVS bond); plans set the VLANs on the aggregate only (plan.py), and
quarantine shuts the aggregate as a whole. On a switch that reports members (the CLI
dialects read a member of ``channel-group N`` with its channel's VLANs), a member whose VLANs
differ from its aggregate's carries traffic of its own. The halves of an MLAG/vPC bond sit on
two switches: both must carry exactly the same VLANs.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufabric.domain.fabric import InvariantSpec, Tenancy
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import EthernetPort
from gpufabric.domain.severity import Severity
from gpufabric.domain.state import EthernetPortConfig, SwitchState

MEMBER_ID = "ETH-BOND-MEMBER-VLAN"
SPLIT_ID = "ETH-BOND-SPLIT"
INVARIANTS = (
    InvariantSpec(MEMBER_ID, Severity.CRITICAL.value,
                  "a bond member carries exactly its aggregate's VLANs, none of its own"),
    InvariantSpec(SPLIT_ID, Severity.HIGH.value,
                  "both switches of an MLAG/vPC bond carry the same VLANs on the bond's aggregates"),
)  # fmt: skip


def _vlans(c: EthernetPortConfig | None) -> str:
    return ",".join(str(v) for v in sorted(c.vlans())) or "none" if c is not None else "unread"


def audit(tenancy: Tenancy, observed: tuple[SwitchState, ...]) -> Iterator[Violation]:
    seen = {s.switch: s for s in observed}

    def cfg(switch: str, port: str) -> EthernetPortConfig | None:
        sw = seen.get(switch)
        return sw.port(port) if sw is not None else None

    for node in tenancy.nodes:
        bonds: dict[str, list[EthernetPort]] = {}
        for p in node.ethernet:
            if p.bond:
                bonds.setdefault(p.bond, []).append(p)
        for bond, members in sorted(bonds.items()):
            aggregates = {m.switch: cfg(m.switch, bond) for m in members}
            for m in members:
                agg, own = aggregates[m.switch], cfg(m.switch, m.switch_port)
                if own is not None and agg is not None and own.vlans() != agg.vlans():
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
