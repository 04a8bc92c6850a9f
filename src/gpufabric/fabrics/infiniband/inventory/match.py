"""Match the CAs of a whole real fabric (an :class:`IbTopology`) to hosts, with a reason for
every node that is not matched (pure).

A real fabric is more than hosts. Held against public dumps of real fabrics (a DGX SuperPOD,
tests/fixtures/real/ibnetdiscover/), a CA is one of:

* a host CA whose node description is ``"HOSTNAME DEVICE"``: rdma-ndd's default
  (``gpu-a01 mlx5_0``), the OFED / DGX OS default ``gpu-a01 HCA-1``, a netdev-style device
  (``SAT1110 ibp11s0f0``), with trailing blanks and upper-case host names. Host names are
  case-insensitive (DNS), so the host is read in lower case: ``GPU-B12 mlx5_0`` is node
  ``gpu-b12``.
* a SHARP aggregation node (``"Mellanox Technologies Aggregation Node"``): a CA inside every
  Quantum switch, not a host -> skipped, reason ``sharp-aggregation-node``.
* a host whose description was never set (``"MT25408 ConnectX Mellanox Technologies"``, the
  firmware default) -> skipped, ``firmware-default-description``.
* anything else (one word, shell metacharacters, more than 64 bytes, a host part that is not a
  node name, two CAs sharing one description) -> skipped with the reason.

Switches and routers are listed as skipped (``switch`` / ``router``) so a report accounts for
every node of the fabric. :meth:`FabricMatch.strict_ports` keeps the all-or-nothing decision
(the first skipped CA is a ValidationError), for ``inventory import --strict``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain import hooks
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import Guid, check_name, check_node_description
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.fabrics.infiniband.plan import DEFAULT_INSTANCE
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import (
    DESCRIPTION_ALLOWED,
    IbNode,
    IbTopology,
    NodeKind,
    OutputFormat,
)

SHARP_AN_DESCRIPTION: Final = "Mellanox Technologies Aggregation Node"
# "HOST DEVICE": mlx5_0, HCA-1, ibp11s0f0, qib0, hfi1_0 ... (a device ends in a digit)
_HOST_DEVICE: Final = re.compile(r"^(?P<host>\S+)\s+(?P<dev>[A-Za-z][A-Za-z0-9_-]*[0-9])$")
# firmware defaults: "MT25408 ConnectX Mellanox Technologies", "MT28908 ConnectX6   Mellanox
# Technologies", "ConnectX-7 Mellanox Technologies", "MT23108 InfiniHost Mellanox Technologies"
_FIRMWARE_DEFAULT: Final = re.compile(r"^(MT\d+\b.*|.*\bMellanox Technologies)$")


class Reason:
    """Why a node was not matched (the ``kind`` of a skip, stable for reports and scripts)."""

    SWITCH: Final = "switch"
    ROUTER: Final = "router"
    SHARP: Final = "sharp-aggregation-node"
    FIRMWARE: Final = "firmware-default-description"
    NOT_HOST_DEVICE: Final = "not-host-device"
    INVALID: Final = "invalid-description"
    HOST: Final = "invalid-host-name"
    DUPLICATE: Final = "duplicate-description"


@dataclass(frozen=True)
class CaMatch:
    """One node of the fabric: matched (host, device, ports) or skipped (reason)."""

    kind: NodeKind
    node_guid: Guid | None
    description: str
    host: str | None = None
    device: str | None = None
    ports: int = 0  # connected ports matched
    skip: str = ""  # one of Reason, "" when matched
    reason: str = ""  # human sentence

    @property
    def skipped(self) -> bool:
        return bool(self.skip)


@dataclass(frozen=True)
class FabricMatch:
    ports: tuple[IbPort, ...]
    cas: tuple[CaMatch, ...]  # every node, in topology order

    def counts(self) -> dict[str, int]:
        """``matched`` and one count per skip reason."""
        c = Counter(n.skip or "matched" for n in self.cas)
        return dict(sorted(c.items()))

    def strict_ports(self) -> tuple[IbPort, ...]:
        """The ports, or ValidationError for the first CA that did not match."""
        s = next((n for n in self.cas if n.kind is NodeKind.CA and n.skipped), None)
        if s is not None:
            raise ValidationError(
                "ib_node_description", s.description, DESCRIPTION_ALLOWED, f"CA {s.node_guid}: {s.reason}"
            )
        return self.ports


def parse_host_device(description: str) -> tuple[str, str] | tuple[None, str, str]:
    """``(host, device)`` of a node description, or ``(None, skip, reason)``."""
    desc = description.strip()
    if desc == SHARP_AN_DESCRIPTION:
        return None, Reason.SHARP, "SHARP aggregation node (inside a Quantum switch), not a host"
    try:  # root on a host sets its own description: printable ASCII, 64 bytes at most
        check_node_description("ib_node_description", desc)
    except ValidationError as e:
        return None, Reason.INVALID, e.message
    m = _HOST_DEVICE.fullmatch(desc)
    if _FIRMWARE_DEFAULT.match(desc) and not (m and m["dev"].startswith(("mlx", "HCA"))):
        return None, Reason.FIRMWARE, "firmware-default description: the host never set it (rdma-ndd)"
    if not m:
        return None, Reason.NOT_HOST_DEVICE, f"not {DESCRIPTION_ALLOWED}"
    host = m["host"].lower()
    try:
        check_name("ib_node_description.host", host)
    except ValidationError as e:
        return None, Reason.HOST, f"host part: {e.message}"
    return host, m["dev"]


def match_fabric(topo: IbTopology) -> FabricMatch:
    """Every connected CA port of the matched CAs as an :class:`IbPort` (sorted by host, device,
    port; names compared naturally so gpu-a9 < gpu-a10), and every node with its outcome."""
    if topo.format is OutputFormat.PORTS:
        raise ValidationError(
            "ibnetdiscover", "ibnetdiscover -p output", "the default ibnetdiscover output", "-p has no CA node GUIDs"
        )
    parsed: list[tuple[IbNode, tuple[str, str] | tuple[None, str, str]]] = [
        (n, parse_host_device(n.description)) for n in topo.nodes if n.kind is NodeKind.CA
    ]
    keys = Counter(f"{r[0]} {r[1]}" for _, r in parsed if r[0] is not None)
    first: dict[str, Guid | None] = {}
    out: dict[int, CaMatch] = {}
    ports: list[IbPort] = []
    for ca, r in parsed:
        assert ca.node_guid is not None
        if r[0] is None:
            out[id(ca)] = CaMatch(NodeKind.CA, ca.node_guid, ca.description, skip=r[1], reason=r[2])
            continue
        host, dev = r[0], r[1]
        key = f"{host} {dev}"
        if keys[key] > 1:  # ambiguous: which CA is "gpu-a01 mlx5_0"? neither is imported
            other = first.setdefault(key, ca.node_guid)
            why = f"{keys[key]} CAs share it (first {other})"
            out[id(ca)] = CaMatch(
                NodeKind.CA, ca.node_guid, ca.description, host, dev, skip=Reason.DUPLICATE, reason=why
            )
            continue
        mine = _ports(topo, ca, host, dev)
        ports += mine
        out[id(ca)] = CaMatch(NodeKind.CA, ca.node_guid, ca.description, host, dev, ports=len(mine))
    cas = tuple(out.get(id(n)) or _other(n) for n in topo.nodes)
    ports.sort(key=lambda p: (_natural(p.node), _natural(p.device), p.port_num))
    return FabricMatch(tuple(ports), cas)


def _other(n: IbNode) -> CaMatch:
    skip = Reason.SWITCH if n.kind is NodeKind.SWITCH else Reason.ROUTER
    return CaMatch(n.kind, n.node_guid, n.description, skip=skip, reason=f"a {n.kind.value}, not a host CA")


def _ports(topo: IbTopology, ca: IbNode, host: str, dev: str) -> list[IbPort]:
    assert ca.node_guid is not None
    out: list[IbPort] = []
    for p in ca.ports:
        if p.port_guid is None:
            continue
        peer = topo.peer(ca.node_guid, p.port_num)
        on_switch = peer is not None and peer.kind is NodeKind.SWITCH
        out.append(
            IbPort(
                node=host,
                device=dev,
                port_num=p.port_num,
                port_guid=p.port_guid,
                node_guid=ca.node_guid,
                switch_guid=peer.node_guid if on_switch and peer else None,
                switch_port=peer.port if on_switch and peer else None,
            )
        )
    return out


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", text) if t)


def import_instance(name: str | None, instances: Mapping[str, Any]) -> str:
    """The IB instance (subnet) an ``ibnetdiscover`` import assigns its HCA ports to
    (``inventory import --fabric NAME``): :func:`~gpufabric.domain.hooks.import_instance` of the
    InfiniBand kind."""
    return hooks.import_instance(name, instances, DEFAULT_INSTANCE, "InfiniBand")


def on_instance(port: IbPort, instance: str) -> IbPort:
    """``port`` assigned to IB instance ``instance``; the default instance is stored as "" (as
    every port imported before instances existed), so re-importing an unchanged subnet changes
    no port."""
    return dataclasses.replace(port, instance="" if instance == DEFAULT_INSTANCE else instance)


# --- CA ports -> inventory ----------------------------------------------------------------
def match_ca_ports(topo: IbTopology) -> tuple[tuple[IbPort, ...], tuple[SkippedCa, ...]]:
    """Every connected CA port as an :class:`IbPort`, plus the CAs that were not matched
    (see :func:`match_fabric`)."""
    m = match_fabric(topo)
    skipped = tuple(
        SkippedCa(c.node_guid, c.description, c.reason) for c in m.cas if c.kind is NodeKind.CA and c.skipped
    )
    return m.ports, skipped


def ib_ports_from_topology(topo: IbTopology) -> tuple[IbPort, ...]:
    """CA ports matched to hosts by node description; ValidationError for a CA that does not
    match (the ``--strict`` all-or-nothing import)."""
    return match_fabric(topo).strict_ports()


@dataclass(frozen=True)
class SkippedCa:
    node_guid: Guid | None
    description: str
    reason: str
