"""Pure parser of ``ibnetdiscover`` output (infiniband-diags) into an :class:`IbTopology`.

Both forms are understood and told apart automatically:

* the default topology output (``vendid=`` / ``switchguid=`` / ``caguid=`` id lines, then
  ``Switch 36 "S-<guid>"  # "desc" base port 0 lid 3 lmc 0`` and ``Ca 1 "H-<guid>"  # "desc"``
  records, each followed by one ``[port]`` line per *connected* port). It gives node GUIDs,
  system image GUIDs, CA port GUIDs (``[1](<guid>)``), LIDs, and every link from both ends.
* the ports report ``ibnetdiscover -p`` (``CA  4  1 0x<port guid> 4x SDR - SW  3  1 0x<guid>
  ( 'desc' - 'remote desc' )``, one line per port, connected or not). It prints *port*
  GUIDs only: CA node GUIDs and node port counts are unknown there (``None``); the ports of
  one node are the consecutive lines of the same type and description (the tool prints
  each node's ports together, highest first).

Line formats are those of rdma-core's infiniband-diags/ibnetdiscover.c (``out_switch``,
``out_ca``, ``out_switch_port``, ``out_ca_port``, ``dump_ports_report``); the unit tests run on
outputs recorded from ibsim (tests/fixtures/ibnetdiscover/). Anything that looks like a node
or port line but does not parse raises :class:`ValidationError` with the line number.

:func:`~gpufabric.fabrics.infiniband.inventory.match.ib_ports_from_topology` turns the CA ports into inventory rows,
matching each CA to its host by node description ``"HOSTNAME DEVICE"`` (rdma-ndd's default
``gpu-a01 mlx5_0``, the OFED/DGX OS default ``gpu-a01 HCA-1``); a CA that does not match is
an *error* there (the all-or-nothing ``--strict`` import). :func:`match_ca_ports` is the
lenient variant, and :mod:`gpufabric.fabrics.infiniband.inventory.match` reports every node of a
whole real fabric (switches, SHARP aggregation nodes, unconfigured hosts) with the reason it
was skipped. Real outputs (a DGX SuperPOD among them) are pinned by
tests/fixtures/real/ibnetdiscover/ and tests/unit/test_real_outputs.py.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Final

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.values import Guid


class NodeKind(enum.StrEnum):
    SWITCH = "switch"
    CA = "ca"
    ROUTER = "router"


class OutputFormat(enum.StrEnum):
    TOPOLOGY = "topology"  # default ibnetdiscover output
    PORTS = "ports"  # ibnetdiscover -p


@dataclass(frozen=True)
class IbNodePort:
    port_num: int
    port_guid: Guid | None  # CA/router port GUID; for switches the switch port GUID
    lid: int | None = None
    lmc: int | None = None
    width: str = ""
    speed: str = ""


@dataclass(frozen=True)
class IbNode:
    kind: NodeKind
    node_guid: Guid | None  # None in the -p report
    description: str
    num_ports: int | None = None  # None in the -p report
    sysimg_guid: Guid | None = None
    vendor_id: int | None = None
    device_id: int | None = None
    lid: int | None = None  # switch: LID of port 0 (CAs have per-port LIDs)
    port_guid: Guid | None = None  # switch: port GUID (port 0 / all ports)
    ports: tuple[IbNodePort, ...] = ()

    @property
    def lids(self) -> tuple[int, ...]:
        if self.kind is NodeKind.SWITCH:
            return (self.lid,) if self.lid is not None else ()
        return tuple(p.lid for p in self.ports if p.lid is not None)

    def port(self, num: int) -> IbNodePort | None:
        return next((p for p in self.ports if p.port_num == num), None)


@dataclass(frozen=True)
class IbEndpoint:
    kind: NodeKind
    node_guid: Guid | None
    port: int
    port_guid: Guid | None
    description: str

    @property
    def key(self) -> tuple[int, int]:
        g = self.node_guid if self.node_guid is not None else self.port_guid
        assert g is not None
        return (g.value, self.port)


@dataclass(frozen=True)
class IbLink:
    a: IbEndpoint
    b: IbEndpoint
    width: str = ""
    speed: str = ""

    def other(self, key: tuple[int, int]) -> IbEndpoint | None:
        if self.a.key == key:
            return self.b
        if self.b.key == key:
            return self.a
        return None


@dataclass(frozen=True)
class IbTopology:
    format: OutputFormat
    nodes: tuple[IbNode, ...]
    links: tuple[IbLink, ...]

    def switches(self) -> tuple[IbNode, ...]:
        return tuple(n for n in self.nodes if n.kind is NodeKind.SWITCH)

    def cas(self) -> tuple[IbNode, ...]:
        return tuple(n for n in self.nodes if n.kind is NodeKind.CA)

    def node(self, guid: Guid) -> IbNode | None:
        return next((n for n in self.nodes if guid in (n.node_guid, n.port_guid)), None)

    def peer(self, guid: Guid, port: int) -> IbEndpoint | None:
        """The far end of the link at (node GUID — or port GUID in -p output —, port)."""
        return self._peers.get((guid.value, port))

    @cached_property
    def _peers(self) -> dict[tuple[int, int], IbEndpoint]:
        # one pass over the links: a whole SuperPOD (12 852 links) would be quadratic otherwise
        out: dict[tuple[int, int], IbEndpoint] = {}
        for lk in self.links:
            out.setdefault(lk.a.key, lk.b)
            out.setdefault(lk.b.key, lk.a)
        return out


# --- regular expressions (rdma-core infiniband-diags/ibnetdiscover.c) --------------------
_KIND = {"S": NodeKind.SWITCH, "H": NodeKind.CA, "R": NodeKind.ROUTER}
_PKIND = {"SW": NodeKind.SWITCH, "CA": NodeKind.CA, "RT": NodeKind.ROUTER}
_WS: Final = r"(?P<width>\d+x|\?\?)(?P<speed>[A-Z0-9?]+)"
# Tabs between the fields may be lost (a PuTTY capture turns them into nothing): "Switch41",
# '"S-<guid>"# "desc"', '[1]"H-<guid>"' all occur in real saved outputs, so separators are \s*.
_SW_HDR: Final = re.compile(
    r'^Switch\s*(?P<n>\d+)\s+"S-(?P<guid>[0-9a-f]+)"\s*#\s*"(?P<desc>.*)"\s+(?:base|enhanced) port 0'
    r"\s+lid (?P<lid>\d+)\s+lmc (?P<lmc>\d+)"
)
_CA_HDR: Final = re.compile(r'^(?P<t>Ca|Rt)\s*(?P<n>\d+)\s+"(?P<k>[HR])-(?P<guid>[0-9a-f]+)"\s*#\s*"(?P<desc>.*)"')
_SW_PORT: Final = re.compile(
    r'^\[(?P<p>\d+)\](?:\[ext \d+\])?\s*"(?P<rk>[SHR])-(?P<rguid>[0-9a-f]+)"\[(?P<rp>\d+)\](?:\[ext \d+\])?'
    r'(?:\s*\((?P<rpguid>[0-9a-f]+)\))?\s*#\s*"(?P<rdesc>.*)"\s+lid (?P<rlid>\d+) ' + _WS
)
_CA_PORT: Final = re.compile(
    r'^\[(?P<p>\d+)\]\((?P<pguid>[0-9a-f]+)\)\s*"(?P<rk>[SHR])-(?P<rguid>[0-9a-f]+)"\[(?P<rp>\d+)\](?:\[ext \d+\])?'
    r'(?:\s*\((?P<rpguid>[0-9a-f]+)\))?\s*#\s*lid (?P<lid>\d+) lmc (?P<lmc>\d+) "(?P<rdesc>.*)"\s+lid (?P<rlid>\d+) '
    + _WS
)
_ID_LINE: Final = re.compile(r"^(?P<key>vendid|devid|sysimgguid|switchguid|caguid|rtguid)=0x(?P<v>[0-9a-f]+)")
_SWGUID_PORT: Final = re.compile(r"^switchguid=0x[0-9a-f]+\((?P<pg>[0-9a-f]+)\)")
# A -p line: "SW 2 19 0x<guid> 4x SDR - CA 1 1 0x<guid> ( 'desc' - 'rdesc' )" or, unconnected,
# "SW 2 19 0x<guid> 4x SDR 'desc'". The descriptions are host-set text that may hold "' - '"
# themselves; one pattern with two unbounded .* around that separator backtracked
# quadratically on a long line that never closed (issue 31). The fields are matched by patterns
# without .*; the descriptions are cut with string operations (:func:`_p_line`), linear.
_P_HEAD: Final = re.compile(
    r"(?P<t>SW|CA|RT)\s+(?P<lid>\d+)\s+(?P<p>\d+)\s+0x(?P<guid>[0-9a-f]{16})\s+(?P<width>\S+)\s+(?P<speed>\S+)"
)
_P_PEER: Final = re.compile(r"\s+-\s+(?P<rt>SW|CA|RT)\s+(?P<rlid>\d+)\s+(?P<rp>\d+)\s+0x(?P<rguid>[0-9a-f]{16})\s+\(\s'")
_P_OWN: Final = re.compile(r"\s+'")
_P_SEP: Final = re.compile(r"(?='\s-\s')")  # each start of "' - '" (overlapping ones too)
_P_DETECT: Final = re.compile(r"^(SW|CA|RT)\s+\d+\s+\d+\s+0x[0-9a-f]{16}\s")
_HDR_DETECT: Final = re.compile(r"^(Switch|Ca|Rt)\s*\d+\s+\"")
_EXPECTED = "the text printed by `ibnetdiscover` or `ibnetdiscover -p`"


def parse_ibnetdiscover(text: str) -> IbTopology:
    """Parse the default or the ``-p`` output of ibnetdiscover (detected from the text)."""
    lines = text.splitlines()
    if any(_P_DETECT.match(ln) for ln in lines):
        return _parse_ports(lines)
    if any(_HDR_DETECT.match(ln) for ln in lines):
        return _parse_topology(lines)
    first = next((ln for ln in lines if ln.strip() and not ln.startswith("#")), text[:60])
    raise ValidationError("ibnetdiscover", first, _EXPECTED, "no node found")


def _bad(lineno: int, line: str, what: str) -> ValidationError:
    return ValidationError("ibnetdiscover", line, _EXPECTED, f"line {lineno}: unparsable {what}")


def _g(hexdigits: str) -> Guid:
    return Guid(int(hexdigits, 16))


def _parse_topology(lines: list[str]) -> IbTopology:
    nodes: list[IbNode] = []
    raw_links: list[IbLink] = []
    ids: dict[str, int] = {}
    sw_port_guid: Guid | None = None
    cur: IbNode | None = None
    cur_ports: list[IbNodePort] = []

    def flush() -> None:
        nonlocal cur, cur_ports
        if cur is not None:
            nodes.append(replace(cur, ports=tuple(cur_ports)))
        cur, cur_ports = None, []

    for no, line in enumerate(lines, start=1):
        s = line.strip()
        if m := _ID_LINE.match(s):
            if m["key"] == "vendid":
                flush()
                ids, sw_port_guid = {}, None
            ids[m["key"]] = int(m["v"], 16)
            if pm := _SWGUID_PORT.match(s):
                sw_port_guid = _g(pm["pg"])
        elif s.startswith("Switch"):
            if not (m := _SW_HDR.match(s)):
                raise _bad(no, line, "switch record")
            flush()
            guid = _g(m["guid"])
            cur = IbNode(NodeKind.SWITCH, guid, m["desc"], int(m["n"]), _opt_guid(ids.get("sysimgguid")),
                         ids.get("vendid"), ids.get("devid"), int(m["lid"]), sw_port_guid or guid)  # fmt: skip
        elif s.startswith(("Ca", "Rt")) and _HDR_DETECT.match(s):
            if not (m := _CA_HDR.match(s)):
                raise _bad(no, line, "CA record")
            flush()
            kind = NodeKind.CA if m["t"] == "Ca" else NodeKind.ROUTER
            cur = IbNode(kind, _g(m["guid"]), m["desc"], int(m["n"]), _opt_guid(ids.get("sysimgguid")),
                         ids.get("vendid"), ids.get("devid"))  # fmt: skip
        elif s.startswith("["):
            if cur is None:
                raise _bad(no, line, "port line outside a node record")
            m = _SW_PORT.match(s) if cur.kind is NodeKind.SWITCH else _CA_PORT.match(s)
            if not m:
                raise _bad(no, line, "port line")
            port = int(m["p"])
            if cur.kind is NodeKind.SWITCH:
                local_pg = cur.port_guid
                cur_ports.append(IbNodePort(port, local_pg, cur.lid, None, m["width"], m["speed"]))
            else:
                local_pg = _g(m["pguid"])
                cur_ports.append(IbNodePort(port, local_pg, int(m["lid"]), int(m["lmc"]), m["width"], m["speed"]))
            rpg = _g(m["rpguid"]) if m["rpguid"] else None
            a = IbEndpoint(cur.kind, cur.node_guid, port, local_pg, cur.description)
            b = IbEndpoint(_KIND[m["rk"]], _g(m["rguid"]), int(m["rp"]), rpg, m["rdesc"])
            raw_links.append(IbLink(a, b, m["width"], m["speed"]))
    flush()
    # the far end of a CA->switch line carries no port GUID: fill it from the switch record
    by_guid = {n.node_guid.value: n for n in nodes if n.node_guid is not None}

    def fill(e: IbEndpoint) -> IbEndpoint:
        if e.port_guid is not None or e.node_guid is None or (n := by_guid.get(e.node_guid.value)) is None:
            return e
        pg = n.port_guid if n.kind is NodeKind.SWITCH else (p.port_guid if (p := n.port(e.port)) else None)
        return replace(e, port_guid=pg)

    links = [IbLink(fill(lk.a), fill(lk.b), lk.width, lk.speed) for lk in raw_links]
    return IbTopology(OutputFormat.TOPOLOGY, tuple(nodes), _dedup(links))


def _opt_guid(v: int | None) -> Guid | None:
    return Guid(v) if v is not None else None


def _dedup(links: list[IbLink]) -> tuple[IbLink, ...]:
    seen: set[frozenset[tuple[int, int]]] = set()
    out: list[IbLink] = []
    for lk in links:
        k = frozenset((lk.a.key, lk.b.key))
        if k not in seen:
            seen.add(k)
            out.append(lk)
    return tuple(out)


def _p_line(line: str) -> dict[str, Any] | None:
    """The fields of one ``-p`` line (``rt`` None when the port is not connected, its
    description then ``odesc``), or None when it is not one. The connected form's two
    descriptions are split at the last ``' - '`` that leaves the closing ``' )``, as a greedy
    ``'(.*)' - '(.*)' )`` reads them."""
    head = _P_HEAD.match(line)
    if head is None:
        return None
    out: dict[str, Any] = dict.fromkeys(("rt", "rlid", "rp", "rguid", "desc", "rdesc", "odesc"))
    out.update(head.groupdict())
    tail = line[head.end() :].rstrip()
    if peer := _P_PEER.match(tail):
        body = tail[peer.end() :]
        if len(body) < 8 or body[-1] != ")" or not body[-2].isspace() or body[-3] != "'":
            return None
        core = body[:-3]
        seps = [m.start() for m in _P_SEP.finditer(core)]
        if not seps:
            return None
        out.update(peer.groupdict(), desc=core[: seps[-1]], rdesc=core[seps[-1] + 5 :])
        return out
    if (own := _P_OWN.match(tail)) and len(tail) - own.end() >= 1 and tail[-1] == "'":
        out["odesc"] = tail[own.end() : -1]
        return out
    return None


def _parse_ports(lines: list[str]) -> IbTopology:
    nodes: list[IbNode] = []
    links: list[IbLink] = []
    cur: IbNode | None = None
    cur_ports: list[IbNodePort] = []
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if not (m := _p_line(line)):
            if _P_DETECT.match(line) or line.lstrip()[:2] in _PKIND:
                raise _bad(no, line, "port report line")
            continue
        kind, port, guid = _PKIND[m["t"]], int(m["p"]), _g(m["guid"])
        desc = m["desc"] if m["rt"] else m["odesc"]
        lid = int(m["lid"])
        same = (
            cur is not None
            and cur.kind is kind
            and cur.description == desc
            and (kind is not NodeKind.SWITCH or cur.port_guid == guid)
            and all(p.port_num > port for p in cur_ports)
        )
        if not same:
            if cur is not None:
                nodes.append(replace(cur, ports=tuple(sorted(cur_ports, key=lambda p: p.port_num))))
            sw = kind is NodeKind.SWITCH
            cur = IbNode(kind, None, desc, lid=lid if sw else None, port_guid=guid if sw else None)
            cur_ports = []
        cur_ports.append(IbNodePort(port, guid, lid, None, m["width"], m["speed"]))
        if m["rt"]:
            a = IbEndpoint(kind, None, port, guid, desc)
            b = IbEndpoint(_PKIND[m["rt"]], None, int(m["rp"]), _g(m["rguid"]), m["rdesc"])
            links.append(IbLink(a, b, m["width"], m["speed"]))
    if cur is not None:
        nodes.append(replace(cur, ports=tuple(sorted(cur_ports, key=lambda p: p.port_num))))
    return IbTopology(OutputFormat.PORTS, tuple(nodes), _dedup(links))


DESCRIPTION_ALLOWED: Final = '"HOSTNAME DEVICE" as rdma-ndd sets it, e.g. "gpu-a01 mlx5_0" or "gpu-a01 HCA-1"'


@dataclass(frozen=True)
class CaPort:
    """A CA port found by ibnetdiscover, with the switch port it is cabled to."""

    guid: Guid
    lid: int
    port_num: int
    description: str  # node description, "gpu-a01 mlx5_0": set by the host, never a node's name (see audit/places.py)
    switch_lid: int | None = None
    switch_port: int | None = None
    switch_guid: Guid | None = None  # the switch's node GUID (what the inventory's switch_guid holds)


def ca_ports(topo: IbTopology) -> dict[Guid, CaPort]:
    """Every CA port with a LID, keyed by port GUID."""
    out: dict[Guid, CaPort] = {}
    for node in topo.cas():
        for p in node.ports:
            if p.port_guid is None or not p.lid:
                continue
            peer = topo.peer(p.port_guid, p.port_num)
            sw_lid = sw_guid = None
            if peer is not None and peer.kind is NodeKind.SWITCH and peer.port_guid is not None:
                sw = topo.node(peer.port_guid)
                sw_lid = sw.lid if sw is not None else None
                sw_guid = sw.node_guid if sw is not None and sw.node_guid is not None else peer.port_guid
            out[p.port_guid] = CaPort(
                p.port_guid, p.lid, p.port_num, node.description, sw_lid, peer.port if peer else None, sw_guid
            )
    return out
