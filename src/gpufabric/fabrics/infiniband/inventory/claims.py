"""An ibnetdiscover re-import against what the store knows (pure): a node description is a
claim, not an identity (issue 31).

Root on a host sets its HCA's node description (rdma-ndd, sysfs ``node_desc``) at will, so what
a description says is only a *claim* (``"gpu-b01 mlx5_9"``); what the fabric itself reports — the
port GUID, the HCA's node GUID, the port number and the switch GUID/port it is cabled to — is
read from NodeInfo and the switches, which a host does not write. So, per CA port seen:

* a port GUID the store knows stays with its stored node, under its stored device name, whatever
  its description says or whether its CA was skipped (invalid, duplicate, firmware-default
  description): a skipped CA never removes a known port, and a port not on the fabric at all
  (link down, HCA pulled) is kept too (a YAML/JSON import removes ports);
* a description naming another node (a GUID changing node) or another device, a new GUID
  joining a node the store already has, and cabling that differs from the stored one are
  **held**: reported as :class:`Held`, applied only when the operator confirms them by
  ``PORT_GUID=NODE`` (:attr:`Held.token`) or ``all`` — never while a node the change touches is
  leased or moving (its ports are in a tenant);
* a new GUID on a new node is added (a first import), stored cabling missing on a quarantined
  node is filled in from the fabric.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import Node, NodeState
from gpufabric.domain.values import Guid, check_name
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports, with_ib
from gpufabric.fabrics.infiniband.inventory.match import FabricMatch, on_instance
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import IbTopology, NodeKind

CONFIRM: Final = "--confirm"
ALL: Final = "all"
CONFIRM_ALLOWED: Final = "PORT_GUID=NODE as the import lists a held change (e.g. 0x0002c90310000111=gpu-a01), or all"
BUSY: Final = (NodeState.LEASED, NodeState.MOVING)
_UNCLAIMED: Final = "unclaimed"  # a placeholder name: a known port takes its stored node's, an unknown one is not stored


@dataclass(frozen=True)
class Seen:
    """A CA port as the fabric reports it (NodeInfo and the switch it is cabled to), with the
    description's claim (``host``/``device``; None when its CA was skipped)."""

    port_guid: Guid
    node_guid: Guid
    port_num: int
    switch_guid: Guid | None
    switch_port: int | None
    description: str
    host: str | None = None
    device: str | None = None


@dataclass(frozen=True)
class Held:
    """A change the import does not apply without the operator's confirmation."""

    port_guid: Guid
    node: str  # the node the port belongs to once confirmed
    change: str  # "join" | "move" | "device" | "cabling"
    reason: str
    port: IbPort  # the entry the change stores
    was: str = ""  # the stored node ("" for a new GUID)
    blocked: str = ""  # why a confirmation cannot apply it now (a leased node, a taken device)
    replaces: Guid | None = None  # the stored port at the same device/port, not on the fabric (a replaced HCA)

    @property
    def token(self) -> str:
        """What ``--confirm`` takes for it."""
        return f"{self.port_guid}={self.node}"

    def line(self) -> str:
        why = f"; {self.blocked}" if self.blocked else f" (confirm: --confirm {self.token})"
        return f"held {self.change} of port {self.port_guid}: {self.reason}{why}"

    def doc(self) -> dict[str, object]:
        return {"port_guid": str(self.port_guid), "node": self.node, "was": self.was or None,
                "change": self.change, "reason": self.reason, "confirm": self.token,
                "blocked": self.blocked or None}  # fmt: skip


@dataclass(frozen=True)
class Claims:
    """The outcome: the nodes to write (every node owning a port seen, changed or not), the
    changes held, the known ports the fabric did not show (kept) and the confirmations used."""

    nodes: tuple[Node, ...]
    held: tuple[Held, ...]
    missing: tuple[IbPort, ...]
    confirmed: tuple[Held, ...]


def parse_confirm(values: Iterable[str]) -> frozenset[str]:
    """``--confirm`` values (``PORT_GUID=NODE`` or ``all``; several per value, comma-separated)
    as canonical tokens; ValidationError naming ``--confirm`` for a malformed one."""
    out: set[str] = set()
    for raw in values:
        for v in (s.strip() for s in str(raw).split(",")):
            if v.lower() == ALL:
                out.add(ALL)
                continue
            guid, sep, node = v.partition("=")
            if not sep:
                raise ValidationError(CONFIRM, v, CONFIRM_ALLOWED)
            try:
                g = Guid.parse(guid, field=CONFIRM)
                check_name(CONFIRM, node)
            except ValidationError:
                raise ValidationError(CONFIRM, v, CONFIRM_ALLOWED) from None
            out.add(f"{g}={node}")
    return frozenset(out)


def seen_ports(topo: IbTopology, m: FabricMatch) -> tuple[Seen, ...]:
    """Every CA port with a port GUID in ``topo``, cabling from the switches, and the claim of
    its CA's description when ``m`` matched it."""
    claim = {c.node_guid: (c.host, c.device) for c in m.cas if c.kind is NodeKind.CA and not c.skipped}
    out: list[Seen] = []
    for ca in topo.cas():
        assert ca.node_guid is not None
        host, dev = claim.get(ca.node_guid, (None, None))
        for p in ca.ports:
            if p.port_guid is None:
                continue
            peer = topo.peer(ca.node_guid, p.port_num)
            sw = peer is not None and peer.kind is NodeKind.SWITCH
            out.append(Seen(p.port_guid, ca.node_guid, p.port_num, peer.node_guid if sw and peer else None,
                            peer.port if sw and peer else None, ca.description, host, dev))  # fmt: skip
    return tuple(out)


def resolve(seen: Sequence[Seen], known: Sequence[Node], instance: str, confirm: Collection[str] = ()) -> Claims:
    """What a re-import of ``instance`` writes and holds (see the module docstring).
    ``confirm``: tokens of :func:`parse_confirm`; one that names no held change is a
    ValidationError naming ``--confirm`` (nothing is written)."""
    nodes = {n.name: n for n in known}
    entries = {n.name: all_ib_ports(n) for n in known}  # each node's entries read once
    owner = {q.port_guid: q for qs in entries.values() for q in qs}
    ports: dict[str, dict[Guid, IbPort]] = {name: {q.port_guid: q for q in qs} for name, qs in entries.items()}
    touched: set[str] = set()
    changed: set[str] = set()  # nodes whose ports this import changes (the others are written as stored)
    held: list[Held] = []
    for s in seen:
        here = on_instance(_entry(s, s.host or _UNCLAIMED, s.device or _UNCLAIMED), instance)
        stored = owner.get(s.port_guid)
        if stored is not None:
            touched.add(stored.node)
            h = _known(s, stored, here, instance)
            if h is not None:
                held.append(h)
            elif _fills(stored, here) and nodes[stored.node].state not in BUSY:  # stored cabling missing: the fabric's, on a quarantined node
                ports[stored.node][s.port_guid] = dataclasses.replace(stored, switch_guid=s.switch_guid,
                                                                      switch_port=s.switch_port)  # fmt: skip
                changed.add(stored.node)
            continue
        if s.host is None or s.device is None:
            continue  # a skipped CA's unknown port: reported as skipped, nothing stored
        new = dataclasses.replace(here, node=s.host)
        if s.host in nodes:
            held.append(Held(s.port_guid, s.host, "join",
                             f"new port GUID {s.port_guid} described as {s.description.strip()!r} would join "
                             f"existing node {s.host} as {s.device}/{s.port_num}", new))  # fmt: skip
            touched.add(s.host)
            continue
        ports.setdefault(s.host, {})[s.port_guid] = new  # a new node: a first import
        touched.add(s.host)
        changed.add(s.host)
    seen_guids = {s.port_guid for s in seen}
    held = [_blocked(h, nodes, ports, seen_guids) for h in held]
    confirmed = _confirmed(held, frozenset(confirm))
    for h in confirmed:
        if h.was:
            ports[h.was].pop(h.port_guid, None)
        if h.replaces is not None:
            ports[h.node].pop(h.replaces, None)
        ports.setdefault(h.node, {})[h.port_guid] = h.port
        touched.add(h.node)
        changed.update(n for n in (h.was, h.node) if n)
    out = []
    for name in sorted(touched):
        if name not in changed:
            out.append(nodes[name])
            continue
        mine = tuple(ports.get(name, {}).values())
        out.append(with_ib(nodes.get(name) or Node(name), *mine))
    missing = tuple(q for q in owner.values() if q.subnet == instance and q.port_guid not in seen_guids)
    done = {h.port_guid for h in confirmed}
    return Claims(tuple(out), tuple(h for h in held if h.port_guid not in done), missing, tuple(confirmed))


def _entry(s: Seen, node: str, device: str) -> IbPort:
    return IbPort(node, device, s.port_num, s.port_guid, s.node_guid, s.switch_guid, s.switch_port)


def _known(s: Seen, stored: IbPort, here: IbPort, instance: str) -> Held | None:
    """The change a known port's sighting asks for, or None (nothing held)."""
    why: list[str] = []
    if stored.subnet != instance:
        why.append(f"stored on instance {stored.subnet}, seen on {instance}")
    if stored.node_guid != s.node_guid:
        why.append(f"HCA node GUID {s.node_guid}, stored {stored.node_guid}")
    if stored.port_num != s.port_num:
        why.append(f"port {s.port_num}, stored {stored.port_num}")
    if stored.switch_guid is not None and (stored.switch_guid, stored.switch_port) != (s.switch_guid, s.switch_port):
        why.append(f"cabled to switch {s.switch_guid} port {s.switch_port}, stored switch {stored.switch_guid} "
                   f"port {stored.switch_port}")  # fmt: skip
    target, device, change = stored.node, stored.device, "cabling"
    claim = f"described as {s.description.strip()!r}"
    if s.host is not None and s.device is not None and s.host != stored.node:
        target, device, change = s.host, s.device, "move"
        why.insert(0, f"port GUID {s.port_guid} of node {stored.node} ({stored.device}) {claim}: the description "
                      f"would move it to node {s.host}")  # fmt: skip
    elif s.device is not None and s.host == stored.node and s.device != stored.device:
        device, change = s.device, "device"
        why.insert(0, f"port GUID {s.port_guid} of node {stored.node} {claim}: device {stored.device} would be "
                      f"renamed {s.device}")  # fmt: skip
    elif why:
        why.insert(0, f"port GUID {s.port_guid} of node {stored.node} ({stored.device})")
    if not why:
        return None
    port = dataclasses.replace(here, node=target, device=device)
    return Held(s.port_guid, target, change, "; ".join(why), port, stored.node if target != stored.node else "")


def _fills(stored: IbPort, here: IbPort) -> bool:
    return stored.switch_guid is None and here.switch_guid is not None


def _blocked(h: Held, nodes: Mapping[str, Node], ports: Mapping[str, Mapping[Guid, IbPort]],
             seen: Collection[Guid]) -> Held:  # fmt: skip
    """``h`` with why a confirmation cannot apply it now, if anything does: a leased or moving
    node, or the same device/port on the node held by another port GUID the fabric shows (one
    the fabric does not show is what the confirmed port replaces: a replaced HCA)."""
    for name in dict.fromkeys((h.was, h.node)):
        n = nodes.get(name) if name else None
        if n is not None and n.state in BUSY:
            return dataclasses.replace(h, blocked=f"node {name} is {n.state.value}: its ports change only in quarantine")
    taken = next((q for q in ports.get(h.node, {}).values() if q.port_guid != h.port_guid
                  and (q.device, q.port_num) == (h.port.device, h.port.port_num)), None)  # fmt: skip
    if taken is not None and taken.port_guid not in seen:
        return dataclasses.replace(h, replaces=taken.port_guid, reason=f"{h.reason}, replacing port GUID "
                                   f"{taken.port_guid} (not on the fabric)")  # fmt: skip
    if taken is not None:
        return dataclasses.replace(h, blocked=f"node {h.node} already has {taken.device}/{taken.port_num} "
                                              f"(port GUID {taken.port_guid})")  # fmt: skip
    return h


def _confirmed(held: Sequence[Held], confirm: frozenset[str]) -> list[Held]:
    """The held changes ``confirm`` applies (a blocked one never); ValidationError naming
    ``--confirm`` for a token naming no held change."""
    tokens = {h.token: h for h in held}
    stray = sorted(t for t in confirm if t != ALL and t not in tokens)
    if stray:
        listed = ", ".join(sorted(tokens)[:5]) + (" ..." if len(tokens) > 5 else "")
        raise ValidationError(CONFIRM, stray[0], f"a change this import holds: {listed}" if tokens
                              else "a change this import holds (it holds none)")  # fmt: skip
    return [h for h in held if not h.blocked and (ALL in confirm or h.token in confirm)]
