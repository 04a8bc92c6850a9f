"""Small audit scenarios: a clean cluster of 3 tenants + quarantine that breaks no
invariant, and mutators that break exactly what a test wants.

Cluster (switches leaf1, leaf2; VLANs: alpha 2001+2003, beta 2002, gamma 2010,
quarantine 4000; PKeys: alpha 0x0a01, beta 0x0a02, gamma none):

=====  ==========  ===========  ==========================
node   tenant      eth port     IB port GUIDs (mlx5_0, mlx5_1)
=====  ==========  ===========  ==========================
a1     alpha       leaf1/p1     0x...a101, 0x...a102
a2     alpha       leaf2/p1     0x...a201, 0x...a202
b1     beta        leaf1/p2     0x...b101, 0x...b102
g1     gamma       leaf1/p3     0x...c101, 0x...c102  (gamma has no IB network)
q1     quarantine  leaf2/p2     0x...f101, 0x...f102
=====  ==========  ===========  ==========================

leaf1/up1 is an uplink trunk (2001-2003, 2010, 4000) cabled to no node.
With ``Scenario.share_q1()`` q1 is a shared host instead (issue 33, InfiniBand): leased to ``infra``
in ``vm-host``, its mlx5_0 GPU 1's rail and mlx5_1 GPU 2's, slot ``q1.s1x1`` (GPU 1) leased to alpha
and ``q1.s2x1`` (GPU 2) to beta, each HCA holding its slot's tenant's PKey.
With ``Scenario.shared()``: a shared host h1 (issue 33) leased to infra in vm-host, its uplink
leaf1/p8 a trunk of 2001+2002, its VM ports hv1/vm1-vm4 (GPUs 1-4); slot h1.s1x2 (GPUs 1-2) leased
to alpha (vm1, vm2 in 2001), slot h1.s3x2 (3-4) to beta (vm3, vm4 in 2002). The trusted SM
(master 0x...ff01, standby 0x...ff02) runs on a node outside the inventory. Every IB port is
stored (and seen) on the IB leaf 0x...0001, ports 1-10 in the table's order (``ib_cable``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from gpufabric.audit import AuditInput, InvariantRegistry, Violation, registry_for, run_audit
from gpufabric.domain.models import Lease, Network, Node, Offering, Segment
from gpufabric.domain.slots import SHARED, SLOTS, VM_HOST
from gpufabric.domain.state import FabricState
from gpufabric.domain.values import Guid, PKey, VlanId
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports, with_ib
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.plan import IbDesired
from gpufabric.fabrics.infiniband.state import (
    IbFabricState,
    Partition,
    PartitionLayout,
    PartitionMember,
    PkeyTable,
    PortCable,
    SmFileSeen,
    SmSeen,
    SmState,
)

from support.ports import port_node
from support.segments import segment

T0 = datetime(2025, 1, 1, tzinfo=UTC)
REGISTRY: InvariantRegistry = registry_for([EthernetKind(), InfinibandKind()])
"""The audit of the two fabric kinds these scenarios exercise (their invariants and the core's)."""
QVLAN = 4000
SM_GUID = Guid(0x0002C9030000FF01)
SM2_GUID = Guid(0x0002C9030000FF02)
ROGUE_GUID = Guid(0x0002C9030000EE01)
UNKNOWN_GUID = Guid(0x0002C9030000DEAD)

ETH_PORT = {"a1": ("leaf1", "p1"), "a2": ("leaf2", "p1"), "b1": ("leaf1", "p2"), "g1": ("leaf1", "p3"),
            "q1": ("leaf2", "p2")}  # fmt: skip
_GUID_BASE = {"a1": 0xA100, "a2": 0xA200, "b1": 0xB100, "g1": 0xC100, "q1": 0xF100}
UPLINK = ("leaf1", "up1")
VLAN_OF = {"alpha": 2001, "beta": 2002, "gamma": 2010}
PKEY_OF = {"alpha": 0x0A01, "beta": 0x0A02}


def guid(node: str, i: int) -> Guid:
    """Port GUID of ``node``'s HCA port ``i`` (0 = mlx5_0, 1 = mlx5_1)."""
    return Guid(0x0002C90300000000 + _GUID_BASE[node] + i + 1)


BOND = "po1"  # with Scenario.bond(): a2's leaf2/p1 and leaf1/p9 are one MLAG bond, aggregate po1 on both
BOND_MEMBERS = (("leaf2", "p1"), ("leaf1", "p9"))


IB_LEAF = Guid(0x0002C90330000001)


def ib_cable(node: str, i: int) -> int:
    """The IB leaf's port ``node``'s HCA port ``i`` is stored (and, clean, seen) on."""
    return 2 * list(ETH_PORT).index(node) + i + 1


def nodes(bonded: bool = False) -> tuple[Node, ...]:
    out = []
    for name, (sw, port) in ETH_PORT.items():
        eth: tuple[EthernetPort, ...] = (EthernetPort(name, "eth0", sw, port),)
        if bonded and name == "a2":
            eth = tuple(EthernetPort(name, f"eth{i}", s, p, "", BOND, "lacp") for i, (s, p) in enumerate(BOND_MEMBERS))
        ib = tuple(IbPort(name, f"mlx5_{i}", 1, guid(name, i), Guid(guid(name, i).value | 1 << 40), IB_LEAF,
                          ib_cable(name, i)) for i in range(2))  # fmt: skip
        out.append(port_node(name, ethernet=eth, ib=ib))
    return tuple(out)


SHARED_ETH = {
    ("leaf1", "p8"): EthernetPortConfig("leaf1", "p8", PortMode.TRUNK, None, (VlanId(2001), VlanId(2002))),
    **{("hv1", f"vm{m}"): EthernetPortConfig("hv1", f"vm{m}", PortMode.ACCESS, VlanId(2001 if m < 3 else 2002))
       for m in range(1, 5)},
}  # fmt: skip


def shared_nodes() -> tuple[Node, ...]:
    """h1 (uplink leaf1/p8, VM ports hv1/vm1-vm4 with gpu 1-4) and its slots h1.s1x2, h1.s3x2."""
    eth = (EthernetPort("h1", "eth0", "leaf1", "p8"), *(EthernetPort("h1", f"vm{m}", "hv1", f"vm{m}", gpu=m) for m in range(1, 5)))
    return (port_node("h1", ethernet=eth), Node("h1.s1x2", host="h1", slot_modules=(1, 2)),
            Node("h1.s3x2", host="h1", slot_modules=(3, 4)))  # fmt: skip


def networks() -> tuple[Network, ...]:
    return (
        Network("alpha-net", "alpha", (segment("ethernet", 2001, VlanId(2001)),
                                       segment("infiniband", 3001, pkey=PKey(0x0A01)))),
        Network("alpha-storage", "alpha", (Segment("ethernet", 2003),)),  # VLAN from seg_id
        Network("beta-net", "beta", (segment("ethernet", 2002, VlanId(2002)),
                                     segment("infiniband", 3002, pkey=PKey(0x0A02)))),
        Network("gamma-net", "gamma", (segment("ethernet", 2010, VlanId(2010)),)),
    )  # fmt: skip


def access(switch: str, port: str, vlan: int) -> EthernetPortConfig:
    return EthernetPortConfig(switch, port, PortMode.ACCESS, VlanId(vlan))


def trunk(switch: str, port: str, native: int | None, *tagged: int) -> EthernetPortConfig:
    return EthernetPortConfig(switch, port, PortMode.TRUNK, VlanId(native) if native else None,
                              tuple(VlanId(v) for v in tagged))  # fmt: skip


def shutdown(switch: str, port: str) -> EthernetPortConfig:
    return EthernetPortConfig(switch, port, PortMode.SHUTDOWN)


@dataclass
class Scenario:
    """A mutable builder; ``build()`` freezes it into an ``AuditInput``.

    The desired state is derived from ``leases`` at build time (quarantine VLAN and the
    default partition only for unleased nodes); the observed state starts equal to the
    desired state of the clean cluster and is changed by the mutators.
    """

    leases: list[tuple[str, str]] = field(
        default_factory=lambda: [("a1", "alpha"), ("a2", "alpha"), ("b1", "beta"), ("g1", "gamma")]
    )
    eth: dict[tuple[str, str], EthernetPortConfig] = field(default_factory=dict)
    tables: dict[Guid, PkeyTable] = field(default_factory=dict)
    sms: list[SmSeen] = field(
        default_factory=lambda: [SmSeen(SM_GUID, 1, 15, SmState.MASTER, "sm1"),
                                 SmSeen(SM2_GUID, 2, 14, SmState.STANDBY, "sm2")]
    )  # fmt: skip
    master: Guid | None = SM_GUID
    extra: list[Violation] = field(default_factory=list)
    give_desired: bool = True
    desired_eth_override: dict[tuple[str, str], EthernetPortConfig] = field(default_factory=dict)
    capacity: int = 16
    bonded: bool = False
    sm_files: list[SmFileSeen] = field(default_factory=list)  # the SM hosts' partitions files (sm_hosts)
    shared_host: bool = False  # with shared(): h1 and its slots
    shared_q1: bool = False  # share_q1(): q1 a shared host with two slots on its two HCAs
    cabling: dict[Guid, PortCable] = field(default_factory=lambda: {
        guid(n, i): PortCable(guid(n, i), IB_LEAF, ib_cable(n, i)) for n in ETH_PORT for i in range(2)})  # fmt: skip

    def __post_init__(self) -> None:
        self.eth = {**self.desired_eth(), UPLINK: trunk(*UPLINK, None, 2001, 2002, 2003, 2010, QVLAN)}
        layout = self.desired_layout()
        for n in ETH_PORT:
            for i in range(2):
                g = guid(n, i)
                self.tables[g] = PkeyTable(g, self._entries(layout, g), self.capacity)
        self.tables[SM_GUID] = PkeyTable(SM_GUID, (0xFFFF,), self.capacity)

    # ----------------------------------------------------------------- desired
    def tenant(self, node: str) -> str | None:
        return next((t for n, t in self.leases if n == node), None)

    def desired_eth(self) -> dict[tuple[str, str], EthernetPortConfig]:
        out = {}
        for n, (sw, port) in ETH_PORT.items():
            t = self.tenant(n)
            for s, p in ([(s, BOND) for s, _ in BOND_MEMBERS] if self.bonded and n == "a2" else [(sw, port)]):
                out[(s, p)] = access(s, p, VLAN_OF.get(t, QVLAN) if t else QVLAN)  # infra (share_q1): no VLAN here
        if self.shared_host:
            out.update(SHARED_ETH)
        out.update(self.desired_eth_override)
        return out

    def desired_layout(self) -> PartitionLayout:
        parts = []
        for tenant, pk in PKEY_OF.items():
            members = tuple(PartitionMember(guid(n, i)) for n in ETH_PORT if self.tenant(n) == tenant for i in range(2))
            parts.append(Partition(f"{tenant}-net", PKey(pk), members))
        return PartitionLayout(tuple(parts), default_full=(SM_GUID,))

    @staticmethod
    def _entries(layout: PartitionLayout, g: Guid) -> tuple[int, ...]:
        entries = [p.pkey.table_entry for p in layout.partitions for m in p.members if m.guid == g]
        return (*entries, 0xFFFF if g in layout.default_full else 0x7FFF)

    # ----------------------------------------------------------------- mutators
    def set_eth(self, node: str, cfg_fn: str, *vlans: int | None) -> Scenario:
        """Observed config of ``node``'s port: ``set_eth("a1", "access", 2002)``,
        ``set_eth("a1", "trunk", native, *tagged)``, ``set_eth("a1", "shutdown")``."""
        sw, port = ETH_PORT[node]
        return self.set_port(sw, port, cfg_fn, *vlans)

    def set_port(self, sw: str, port: str, cfg_fn: str, *vlans: int | None) -> Scenario:
        if cfg_fn == "access":
            assert vlans[0] is not None
            self.eth[(sw, port)] = access(sw, port, vlans[0])
        elif cfg_fn == "trunk":
            self.eth[(sw, port)] = trunk(sw, port, vlans[0], *(v for v in vlans[1:] if v is not None))
        else:
            self.eth[(sw, port)] = shutdown(sw, port)
        return self

    def bond(self) -> Scenario:
        """a2 on an MLAG bond (members leaf2/p1, leaf1/p9; aggregate po1 on both, as desired)."""
        self.bonded = True
        del self.eth[ETH_PORT["a2"]]
        self.eth.update({k: v for k, v in self.desired_eth().items() if k[1] == BOND})
        return self

    def shared(self) -> Scenario:
        """The shared host h1 with its two slots (see the module's docstring), clean."""
        self.shared_host = True
        self.leases += [("h1", "infra"), ("h1.s1x2", "alpha"), ("h1.s3x2", "beta")]
        self.eth.update(SHARED_ETH)
        return self

    def in_bond(self, sw: str, port: str, bond: str = BOND) -> Scenario:
        """The observed ``sw/port`` is read in the aggregate ``bond`` (a member the switch reports;
        default: the bond's own)."""
        self.eth[(sw, port)] = replace(self.eth[(sw, port)], bond=bond)
        return self

    def drop_eth(self, node: str) -> Scenario:
        del self.eth[ETH_PORT[node]]
        return self

    def set_pkeys(self, g: Guid, *entries: int, capacity: int | None = None) -> Scenario:
        self.tables[g] = PkeyTable(g, tuple(entries), self.capacity if capacity is None else capacity)
        return self

    def drop_table(self, g: Guid) -> Scenario:
        del self.tables[g]
        return self

    def share_q1(self) -> Scenario:
        """q1 a shared host (module doc): its slots' PKeys on their GPUs' rail HCAs."""
        self.shared_q1 = True
        self.leases += [("q1", "infra"), ("q1.s1x1", "alpha"), ("q1.s2x1", "beta")]
        self.set_pkeys(guid("q1", 0), 0x8A01, 0x7FFF)
        return self.set_pkeys(guid("q1", 1), 0x8A02, 0x7FFF)

    def _nodes(self) -> tuple[Node, ...]:
        out = (*nodes(self.bonded), *(shared_nodes() if self.shared_host else ()))
        if not self.shared_q1:
            return out
        out = tuple(with_ib(n, *(replace(p, gpu=int(p.device[-1]) + 1) for p in all_ib_ports(n))) if n.name == "q1"
                    else n for n in out)  # fmt: skip
        return (*out, Node("q1.s1x1", host="q1", slot_modules=(1,)), Node("q1.s2x1", host="q1", slot_modules=(2,)))

    def lease(self, node: str, tenant: str) -> Scenario:
        self.leases.append((node, tenant))
        return self

    def unlease(self, node: str) -> Scenario:
        self.leases = [(n, t) for n, t in self.leases if n != node]
        return self

    # ----------------------------------------------------------------- build
    def build(self) -> AuditInput:
        by_switch: dict[str, list[EthernetPortConfig]] = {}
        for cfg in self.eth.values():
            by_switch.setdefault(cfg.switch, []).append(cfg)
        desired: dict[str, list[EthernetPortConfig]] = {}
        for cfg in self.desired_eth().values():
            desired.setdefault(cfg.switch, []).append(cfg)
        observed = FabricState(slices={
            "ethernet": tuple(SwitchState(sw, tuple(ports)) for sw, ports in sorted(by_switch.items())),
            "infiniband": IbFabricState(tables=tuple(self.tables.values()), sms=tuple(self.sms), master_guid=self.master,
                                        sm_files=tuple(self.sm_files), cabling=tuple(self.cabling.values())),
        })
        want = {
            "ethernet": tuple(SwitchState(sw, tuple(p)) for sw, p in sorted(desired.items())),
            "infiniband": IbDesired(self.desired_layout(), ()),
        }
        return AuditInput(
            nodes=self._nodes(),
            leases=tuple(Lease(t, n, T0, offering=VM_HOST if n == "h1" or (self.shared_q1 and n == "q1") else "baremetal")
                         for n, t in self.leases),
            offerings=(Offering(VM_HOST, settings=((SHARED, SLOTS),)), Offering("baremetal")),
            networks=networks(),
            observed=observed,
            settings={"quarantine_vlan": VlanId(QVLAN), "trusted_sm_guids": frozenset({SM_GUID, SM2_GUID}),
                      "sm_port_guids": frozenset({SM_GUID})},
            desired=want if self.give_desired else None,
            extra_findings=tuple(self.extra),
        )  # fmt: skip


# ----------------------------------------------------------------- invariant cases
def g(node: str, i: int) -> str:
    return str(guid(node, i))


@dataclass(frozen=True)
class Case:
    """One scenario for one invariant: mutate the clean cluster, audit that invariant only."""

    id: str
    invariant: str
    mutate: Callable[[Scenario], object]
    expect: tuple[tuple[str, str], ...]  # (port or GUID, node) of each violation; () = passes
    resource: str | None = None  # expected resource of the (single) violation


def noop(s: Scenario) -> None:
    pass


def audit_case(case: Case) -> tuple[Violation, ...]:
    s = Scenario()
    case.mutate(s)
    return run_audit(s.build(), only=[case.invariant], now=T0, registry=REGISTRY).violations


def check_case(case: Case) -> None:
    """The exact (port or GUID, node) of every violation, each named in its message."""
    violations = audit_case(case)
    assert sorted((v.port, v.node) for v in violations) == sorted(case.expect)
    assert {v.invariant for v in violations} <= {case.invariant}
    for v in violations:
        assert v.port in v.message, v.message
        assert v.node in v.message, v.message
    if case.resource is not None:
        assert [v.resource for v in violations] == [case.resource]
