"""A node's Ethernet entries in the inventory: the Ethernet kind's own column of the node port table.

A node's NICs come from its ``ethernet: [...]`` key (:attr:`EthernetKind.inventory_key`, kept on
the kind's default instance ``ethernet``, which every Ethernet instance without entries of its
own reads) or from ``fabrics: {<instance>: [...]}``. Each entry is a mapping with ``name`` (the
NIC on the host), ``switch`` and ``switch_port`` (required), ``mac``, and ``bond`` / ``bond_mode``
when the switch port is a member of an aggregate. :func:`parse_ethernet` checks that shape, each
port name against its switch's dialect (when the inventory's reader knows it), and what one node
must keep to itself (unique NIC names and switch ports; a bond on one switch or an MLAG/vPC pair,
of one mode, not named like a plain member port). What no two nodes may share, the switch ports
and the aggregates, are the node's :func:`ethernet_keys` (unique in the store by a database
constraint). :func:`dump_ethernet` writes back what ``parse_ethernet`` reads.

An entry with ``gpu: m`` (a GPU module id, 1-64) is a **VM port** (issue 33): a tap or VF
representor on the hypervisor's own OVS bridge (a switch of fabrics.yaml like any other), the port
of the VM that gets GPU ``m``; on a shared host it follows the lease of the slot holding that GPU
(:mod:`.plan`). Entries without ``gpu`` are the host's NICs (on a shared host: its uplinks)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.entries import checked, listed, mapping, node_entries, required, text, unique
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import FabricPorts, Node, PortKey
from gpufabric.domain.values import PortNaming, check_mac, check_name, check_port_name

KIND: Final = "ethernet"
"""The kind's name (:attr:`EthernetKind.name`): its default instance, where ``ethernet:`` entries are kept."""
BOND_MODES: Final = ("lacp", "active-backup")
KEYS: Final = frozenset({"name", "switch", "switch_port", "mac", "bond", "bond_mode", "gpu"})
GPU_MODULES: Final = range(1, 65)
GPU_ALLOWED: Final = "a GPU module id 1-64 (the GPU whose VM this port is)"
ENTRY_SCHEMA: Final = {
    "type": "object", "additionalProperties": False, "required": ["name", "switch", "switch_port"],
    "properties": {
        "name": {"type": "string", "description": "the NIC on the host, e.g. eth0; unique per node"},
        "switch": {"type": "string", "description": "the switch it is cabled to, as fabrics.yaml names it"},
        "switch_port": {"type": ["string", "integer"], "description": "the port on that switch, in its dialect's form"},
        "mac": {"type": "string", "description": "six hex octets, e.g. 52:54:00:12:34:56"},
        "bond": {"type": "string", "description": "the switch's aggregate interface this port is a member of"},
        "bond_mode": {"enum": list(BOND_MODES), "description": "with bond only (default lacp)"},
        "gpu": {"type": "integer", "minimum": 1, "maximum": 64,
                "description": "a VM port on the hypervisor's OVS: the module id of the GPU whose VM it serves"},
    },
}
"""One entry as the API's OpenAPI schema shows it (:func:`parse_ethernet` checks it)."""
SWITCH_PORT: Final = f"{KIND}.switch_port"
"""The scope of the port keys: a switch interface (a member port or an aggregate) is one node's."""


@dataclass(frozen=True)
class EthernetPort:
    """A node NIC cabled to a switch port. A bonded NIC's switch port is a member of the
    switch's aggregate interface ``bond`` (port-channel, ``ae``, OVS bond): the VLANs are set on
    the aggregate, never on the member; the members of one node with the same ``bond`` name on
    one switch, or on an MLAG/vPC pair of two switches, are one bond."""

    node: str
    name: str  # the NIC name on the host, e.g. eth0
    switch: str
    switch_port: str
    mac: str = ""
    bond: str = ""  # the switch's aggregate interface this port is a member of ("" = not bonded)
    bond_mode: str = ""  # lacp | active-backup (with bond only)
    gpu: int | None = None  # a VM port (tap / VF representor on the host's OVS): the GPU module id it serves

    def __post_init__(self) -> None:
        check_name("ethernet_port.node", self.node)
        if not self.switch or not self.switch_port:
            raise ValidationError(
                "ethernet_port.switch", f"{self.switch}/{self.switch_port}", "non-empty switch and port"
            )
        if self.bond and self.bond == self.switch_port:
            raise ValidationError("ethernet_port.bond", self.bond, f"an aggregate interface other than the member {self.switch_port}")
        if (self.bond_mode or self.bond) and self.bond_mode not in BOND_MODES:
            what = ", ".join(BOND_MODES) if self.bond else "empty (no bond)"
            raise ValidationError("ethernet_port.bond_mode", self.bond_mode, what)
        if self.mac:
            object.__setattr__(self, "mac", check_mac("ethernet_port.mac", self.mac))
        if self.gpu is not None and (isinstance(self.gpu, bool) or self.gpu not in GPU_MODULES):
            raise ValidationError("ethernet_port.gpu", self.gpu, GPU_ALLOWED)
        if self.gpu is not None and self.bond:
            raise ValidationError("ethernet_port.bond", self.bond, "no bond on a VM port (gpu)")

    @property
    def managed_port(self) -> str:
        """The switch interface that carries this NIC's VLANs: the aggregate when bonded."""
        return self.bond or self.switch_port


# ---------------------------------------------------------------------- reading entries
def parse_ethernet(node: str, raw: Any, where: str, namings: Mapping[str, PortNaming] | None = None) -> tuple[EthernetPort, ...]:
    """A node's entries at ``where`` (a list), each checked (port names against their switch's
    naming in ``namings``), and the node's own rules; sorted by NIC name."""
    found = [_entry(f"{where}[{k}]", node, r, namings or {}) for k, r in enumerate(listed(where, raw))]
    first: dict[tuple[str, Any], str] = {}
    for k, p in enumerate(found):
        unique(first, ("nic", p.name), f"{where}[{k}].name", p.name, "NIC names per node")
        unique(first, ("port", (p.switch, p.switch_port)), f"{where}[{k}].switch_port", f"{p.switch}/{p.switch_port}",
                "switch ports")  # fmt: skip
    _check_bonds(where, found)
    for k, p in enumerate(found):
        if p.gpu is not None:
            unique(first, ("gpu", (p.switch, p.gpu)), f"{where}[{k}].gpu", p.gpu, "VM ports per GPU on one switch")
    return tuple(sorted(found, key=lambda p: p.name))


def _check_bonds(where: str, ports: list[EthernetPort]) -> None:
    """A bond is on one switch or an MLAG/vPC pair (two), of one mode, and its aggregate is not
    also some NIC's plain switch port."""
    groups: dict[str, list[EthernetPort]] = {}
    for p in ports:
        if p.bond:
            groups.setdefault(p.bond, []).append(p)
    plain = {(p.switch, p.switch_port) for p in ports}
    for k, p in enumerate(ports):
        at = f"{where}[{k}]"
        if not p.bond:
            continue
        members = groups[p.bond]
        switches = sorted({m.switch for m in members})
        if len(switches) > 2:
            raise ValidationError(f"{at}.bond", p.bond, "members on one switch or an MLAG/vPC pair (2 switches)",
                                  f"on {', '.join(switches)}")
        if len({m.bond_mode for m in members}) > 1:
            raise ValidationError(f"{at}.bond_mode", p.bond_mode, f"the same mode on every member of {p.bond}")
        if (p.switch, p.bond) in plain:
            raise ValidationError(f"{at}.bond", p.bond, f"an aggregate that is not a member port on {p.switch}")


def _entry(path: str, node: str, raw: Any, namings: Mapping[str, PortNaming]) -> EthernetPort:
    m = mapping(path, raw, KEYS)
    nic = text(f"{path}.name", required(path, m, "name"), "the NIC name on the host, e.g. eth0")
    nic = checked(f"{path}.name", m["name"], lambda: check_port_name(f"{path}.name", nic))
    switch = text(f"{path}.switch", required(path, m, "switch"), "the switch name")
    switch = checked(f"{path}.switch", m["switch"], lambda: check_port_name(f"{path}.switch", switch))
    port = required(path, m, "switch_port")
    if isinstance(port, int) and not isinstance(port, bool):
        port = str(port)
    port = text(f"{path}.switch_port", port, "the switch port name, e.g. Ethernet12 or 1/1/12")
    port = checked(f"{path}.switch_port", m["switch_port"], lambda: check_port_name("", port, namings.get(switch)))
    mac = m.get("mac", "")
    if mac != "":
        allowed = "six colon-separated hex octets as a string, e.g. 52:54:00:12:34:56"
        mac = checked(f"{path}.mac", mac, lambda: check_mac(f"{path}.mac", text(f"{path}.mac", mac, allowed)))
    bond, mode = m.get("bond", ""), m.get("bond_mode", "")
    if bond != "":
        bond = text(f"{path}.bond", bond, "the switch's aggregate interface, e.g. Port-Channel10, ae3, bond0")
        bond = checked(f"{path}.bond", m["bond"], lambda: check_port_name("", bond, namings.get(switch)))
        mode = mode or "lacp"
    if mode not in (BOND_MODES if bond else ("",)):
        raise ValidationError(f"{path}.bond_mode", mode, "lacp or active-backup" if bond else "only with bond")
    gpu = m.get("gpu")
    if gpu is not None:
        if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu not in GPU_MODULES:
            raise ValidationError(f"{path}.gpu", gpu, GPU_ALLOWED)
        if bond:
            raise ValidationError(f"{path}.bond", bond, "no bond on a VM port (an entry with gpu)")
    return EthernetPort(node, nic, switch, port, mac, bond, mode, gpu)


# ---------------------------------------------------------------------- stored entries
def dump_ethernet(ports: tuple[EthernetPort, ...]) -> list[dict[str, Any]]:
    """The JSON entries :func:`parse_ethernet` reads back as ``ports``."""
    return [{"name": p.name, "switch": p.switch, "switch_port": p.switch_port, **({"mac": p.mac} if p.mac else {}),
             **({"bond": p.bond, "bond_mode": p.bond_mode} if p.bond else {}),
             **({"gpu": p.gpu} if p.gpu is not None else {})} for p in ports]  # fmt: skip


def ethernet_keys(ports: tuple[EthernetPort, ...]) -> tuple[PortKey, ...]:
    """The switch interfaces ``ports`` (one node's) hold: each member port, and each aggregate once."""
    out: dict[str, PortKey] = {}
    for k, p in enumerate(ports):
        key = f"{p.switch}/{p.switch_port}"
        out.setdefault(key, PortKey(SWITCH_PORT, key, f"[{k}].switch_port", "switch ports",
                                    f"switch port {key} (node {p.node} {p.name})"))
        if p.bond:
            agg = f"{p.switch}/{p.bond}"
            out.setdefault(agg, PortKey(SWITCH_PORT, agg, f"[{k}].bond", "aggregates of one node",
                                        f"aggregate {agg} (node {p.node} {p.name})"))
    return tuple(out.values())


def ethernet_ports(node: Node, instance: str = KIND) -> tuple[EthernetPort, ...]:
    """``node``'s NICs on the Ethernet instance ``instance``: its own entries there, else those
    of the default instance (every Ethernet instance saw every NIC before instances)."""
    return node_entries(node, instance, _parse_stored, KIND)


def _parse_stored(node: str, raw: Any, where: str) -> tuple[EthernetPort, ...]:
    return parse_ethernet(node, raw, where)


def with_ethernet(node: Node, *ports: EthernetPort, instance: str = KIND) -> Node:
    """``node`` with ``ports`` as its NICs on ``instance`` (tests, the lab, importers)."""
    mine = tuple(sorted(ports, key=lambda p: p.name))
    return node.with_ports(_stored(instance, mine))


def _stored(instance: str, ports: tuple[EthernetPort, ...]) -> FabricPorts:
    return FabricPorts.of(instance, dump_ethernet(ports), ethernet_keys(ports))
