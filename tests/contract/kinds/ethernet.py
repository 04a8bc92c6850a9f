"""Ethernet case: 0-2 NICs per node on two switches, one VLAN per network, observed switch
ports in any mode (drift included); a backend's read-back is each changed switch's ports as
the plan set them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from gpufabric.domain.fabric import FabricPlan, Tenancy
from gpufabric.domain.models import Node, Segment
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.entries import EthernetPort, ethernet_ports, with_ethernet
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.ethernet.plan import EthernetPlan, EthState
from gpufabric.fabrics.ethernet.segments import vlan_segment
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState

from contract.kinds import KindCase

Q = 4000


def node(draw: st.DrawFn, name: str, i: int) -> Mapping[str, Any]:
    n = draw(st.integers(0, 2))
    ports = tuple(EthernetPort(name, f"eth{k}", f"s{k % 2}", f"{name}p{k}") for k in range(n))
    return {"fabric_ports": with_ethernet(Node(name), *ports).fabric_ports}


def segment(i: int) -> Segment:
    return vlan_segment("ethernet", 2000 + i)


@st.composite
def port_config(draw: st.DrawFn, switch: str, port: str, vlans: list[int]) -> EthernetPortConfig:
    vlan = st.sampled_from([*vlans, Q, 1, 3999]).map(VlanId)
    mode = draw(st.sampled_from(PortMode))
    if mode is PortMode.SHUTDOWN:
        return EthernetPortConfig(switch, port, mode)
    if mode is PortMode.ACCESS:
        return EthernetPortConfig(switch, port, mode, draw(vlan))
    trunks = tuple(sorted(set(draw(st.lists(vlan, min_size=1, max_size=3))), key=lambda v: v.value))
    return EthernetPortConfig(switch, port, mode, draw(st.none() | vlan), trunks)


def observed(draw: st.DrawFn, tenancy: Tenancy) -> EthState:
    vlans = sorted(s.seg_id for n in tenancy.networks.values() for s in n.segments if s.fabric == "ethernet")
    ports: dict[str, list[EthernetPortConfig]] = {}
    for n in tenancy.nodes:
        for p in ethernet_ports(n):
            if draw(st.booleans()) or draw(st.booleans()):  # mostly present
                ports.setdefault(p.switch, []).append(draw(port_config(p.switch, p.switch_port, vlans)))
    return tuple(SwitchState(s, tuple(sorted(ps))) for s, ps in sorted(ports.items()))


def read_back(state: EthState, plan: FabricPlan) -> EthState:
    assert isinstance(plan, EthernetPlan)
    return tuple(SwitchState(sw, tuple(sorted(ps))) for sw, ps in plan.by_switch().items())


CASE = KindCase(EthernetKind(), observed, read_back, node=node, segment=segment, settings={"quarantine_vlan": Q})
