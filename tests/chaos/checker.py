"""An independent checker of tenant isolation for the fault campaign (issue 35).

It imports NOTHING from gpufabric: it reads the real fabrics with their own tools and the API's
public interface over HTTP, never gpufabric's code or records as proof.

- Given (read once at start): the lab's status JSON (``gpufabric lab up --json`` / ``lab status``):
  which OVS port, IB port GUID and Fabric Manager belongs to which node, the OVSDB socket, the
  ibsim socket name and the SM host (for the umad2sim LD_PRELOAD env), the quarantine VLAN.
- Tenants' segments: ``GET /api/v1/networks`` (VLAN and PKey of each tenant's networks).
- Sampled (tests/chaos/readers.py): Ethernet by ovs-vsctl, InfiniBand PKey tables by SMP
  (smpquery under ibsim), NVLink by ``fmpm -l`` of each node's Fabric Manager; the move history
  ``GET /api/v1/moves`` with a token.

The invariants are pure functions of samples (``splits``, ``gpu_overlaps``, ``disagreements``,
``Persistence``, ``failed_outside_quarantine``, ``move_outcomes``, ``final_state_errors``, ``convergence``), unit-tested with
constructed samples in tests/chaos/test_checker.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

QUARANTINE = "quarantine"
ALL = "all-vlans"  # an access port with neither tag nor trunks carries every VLAN
FINISHED = frozenset({"done", "failed", "cancelled"})
OPEN = frozenset({"pending", "running"})


# ---- what the checker is given -------------------------------------------------------------
@dataclass(frozen=True)
class NodeInv:
    name: str
    eth_ports: tuple[str, ...]
    guids: tuple[str, ...]
    fm: str | None  # the node's Fabric Manager (fmpm --unix-domain-socket), None: no NVLink


@dataclass(frozen=True)
class Inventory:
    nodes: tuple[NodeInv, ...]
    ovsdb: str
    quarantine_vlan: int
    ibsim_sockname: str = ""
    sm_host: str = ""
    scratch: str = "/tmp"
    fmpm: tuple[str, ...] = ()

    @staticmethod
    def from_status(st: Mapping[str, Any]) -> Inventory:
        fms = ((st.get("nvlink_section") or {}).get("options") or {}).get("fm", {})
        nodes = tuple(
            NodeInv(
                n["name"],
                tuple(dict.fromkeys(e.get("bond") or e["ovs_port"] for e in n["ethernet"])),
                tuple(p["port_guid"] for p in n["ib"]),
                fms[n["name"]].removeprefix("unix:") if n["name"] in fms else None,
            )
            for n in st["nodes"]
        )
        fmpm = ((st.get("nvlink_section") or {}).get("options") or {}).get("fmpm", [])
        return Inventory(
            nodes, st["ovsdb_socket"], int(st.get("quarantine_vlan", 4000)), st.get("ibsim_sockname", ""),
            st.get("sm_node", ""), os.path.join(st.get("home", "/tmp"), "lab", "ib", "scratch"), tuple(fmpm),
        )  # fmt: skip


@dataclass(frozen=True)
class Segments:
    """Which tenant owns each VLAN and each PKey (15-bit), from the API's network list."""

    vlans: Mapping[int, str]
    pkeys: Mapping[int, str]

    @staticmethod
    def from_networks(items: Iterable[Mapping[str, Any]]) -> Segments:
        vlans: dict[int, str] = {}
        pkeys: dict[int, str] = {}
        for n in items:
            for s in n.get("segments", []):
                if s.get("fabric") == "ethernet" and "vlan" in s:
                    vlans[int(s["vlan"])] = n["tenant"]
                elif s.get("fabric") == "infiniband" and "pkey" in s:
                    pkeys[int(str(s["pkey"]), 16) & 0x7FFF] = n["tenant"]
        return Segments(vlans, pkeys)


@dataclass(frozen=True)
class Sample:
    """One reading of every fabric. ``eth``: port -> (tag, trunks); ``ib``: port GUID -> raw PKey
    entries; ``nv``: node -> active partition id -> its GPU physical ids; ``errors``: failed reads
    (a fabric down is not a split; its owners are unknown for this sample). ``eth_after``: OVS read
    again right after the PKey tables: a node whose ports read the same both times held that
    Ethernet state while its PKeys were read (the two fabrics are compared at one instant); a node
    whose ports changed in between moved during the sample (see :func:`unstable`)."""

    t: float
    eth: Mapping[str, tuple[int | None, frozenset[int]]] = field(default_factory=dict)
    ib: Mapping[str, frozenset[int]] = field(default_factory=dict)
    nv: Mapping[str, Mapping[int, frozenset[int]]] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    eth_after: Mapping[str, tuple[int | None, frozenset[int]]] | None = None


def unstable(s: Sample, inv: Inventory) -> frozenset[str]:
    """Nodes whose Ethernet ports changed between the two OVS reads around the PKey read: their
    Ethernet and InfiniBand readings are from different instants and are not compared."""
    if s.eth_after is None:
        return frozenset()
    return frozenset(n.name for n in inv.nodes if any(s.eth.get(p) != s.eth_after.get(p) for p in n.eth_ports))


# ---- pure invariants ------------------------------------------------------------------------
Owners = dict[str, dict[str, frozenset[str]]]  # node -> fabric -> owners seen


def owners(s: Sample, inv: Inventory, seg: Segments) -> Owners:
    """Every owner each node's ports are in, per fabric: tenant names, ``quarantine``, ``all-vlans``,
    ``vlan:N`` (a VLAN no tenant owns). NVLink: ``active`` / ``quarantine`` (no partition active)."""
    out: Owners = {}
    for n in inv.nodes:
        fab: dict[str, frozenset[str]] = {}
        eth: set[str] = set()
        seen_eth = False
        for port in n.eth_ports:
            if port not in s.eth:
                continue
            seen_eth = True
            tag, trunks = s.eth[port]
            vlans = set(trunks) | ({tag} if tag is not None else set())
            if not vlans:
                eth.add(ALL)
            for v in vlans:
                eth.add(QUARANTINE if v == inv.quarantine_vlan else seg.vlans.get(v, f"vlan:{v}"))
        if seen_eth:
            fab["ethernet"] = frozenset(eth)
        ib: set[str] = set()
        seen_ib = False
        for g in n.guids:
            if g not in s.ib:
                continue
            seen_ib = True
            keys = {e & 0x7FFF for e in s.ib[g]} - {0, 0x7FFF}
            ib |= {seg.pkeys[k] for k in keys if k in seg.pkeys}
        if seen_ib:
            fab["infiniband"] = frozenset(ib or {QUARANTINE})
        if n.name in s.nv:
            fab["nvlink"] = frozenset({"active" if s.nv[n.name] else QUARANTINE})
        out[n.name] = fab
    return out


def tenants_of(fabrics: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """The tenants a node is in across Ethernet and InfiniBand (NVLink names no tenant)."""
    got: set[str] = set()
    for f in ("ethernet", "infiniband"):
        got |= fabrics.get(f, frozenset())
    return frozenset(got - {QUARANTINE} - {x for x in got if x.startswith("vlan:")})


def splits(own: Owners, unstable: Iterable[str] = ()) -> list[str]:
    """Nodes in two tenants' segments at once (any port of any fabric), or on a port carrying every
    VLAN. For an ``unstable`` node (its Ethernet changed during the sample) each fabric is judged alone."""
    bad = []
    moved = set(unstable)
    for node, fab in sorted(own.items()):
        ts = tenants_of(fab)
        if node in moved:
            ts = max(
                (tenants_of({f: fab[f]}) for f in ("ethernet", "infiniband") if f in fab), key=len, default=frozenset()
            )
        if len(ts) > 1 or ALL in ts:
            bad.append(f"{node} in {sorted(ts)} ({ {k: sorted(v) for k, v in fab.items()} })")
    return bad


def gpu_overlaps(s: Sample) -> list[str]:
    """GPUs in two active partitions of one Fabric Manager at once."""
    bad = []
    for node, parts in sorted(s.nv.items()):
        seen: dict[int, int] = {}
        for pid, gpus in sorted(parts.items()):
            for g in sorted(gpus):
                if g in seen:
                    bad.append(f"{node} GPU {g} in active partitions {seen[g]} and {pid}")
                seen[g] = pid
    return bad


def disagreement(fab: Mapping[str, frozenset[str]]) -> str | None:
    """Why a node's fabrics disagree (None: they agree): Ethernet and InfiniBand in one same single
    owner, and NVLink active iff that owner is a tenant."""
    eth, ib = fab.get("ethernet"), fab.get("infiniband")
    if eth is not None and ib is not None and eth != ib:
        return f"ethernet {sorted(eth)} != infiniband {sorted(ib)}"
    one = eth if eth is not None else ib
    if one is not None and len(one) != 1:
        return f"in {sorted(one)}"
    nv = fab.get("nvlink")
    if one is not None and nv is not None and ((QUARANTINE in one) != (QUARANTINE in nv)):
        return f"nvlink {sorted(nv)} while {sorted(one)}"
    return None


def disagreements(own: Owners, moving: Iterable[str] = ()) -> dict[str, str]:
    """Nodes not moving whose fabrics disagree (a moving node may be half-way, in quarantine)."""
    skip = set(moving)
    return {n: why for n, fab in own.items() if n not in skip and (why := disagreement(fab)) is not None}


@dataclass
class Persistence:
    """Feeds on (t, disagreeing nodes); a node that disagrees continuously for more than ``grace``
    seconds is a violation (the reconcile loop or the worker should have converged it)."""

    grace: float
    since: dict[str, float] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def feed(self, t: float, bad: Mapping[str, str]) -> None:
        for n in list(self.since):
            if n not in bad:
                del self.since[n]
        for n, why in bad.items():
            start = self.since.setdefault(n, t)
            if t - start > self.grace and not any(v.startswith(f"{n}:") for v in self.violations):
                self.violations.append(f"{n}: {why} for {t - start:.1f}s")


@dataclass(frozen=True)
class MoveReport:
    lost: list[int]  # requested (202 with an id), absent from the history
    duplicated: list[int]  # an id listed twice
    unfinished: list[int]  # requested, still pending/running at the end
    unrequested: list[int]  # in the history, not requested (beyond the ambiguous requests)
    running_twice: list[str]  # a node with two moves open at once
    outcomes: dict[str, int]  # status -> count of the requested moves


def move_outcomes(
    requested: Mapping[int, str], history: Sequence[Mapping[str, Any]], ambiguous: Mapping[str, int] | None = None,
    before: Iterable[int] = (),
) -> MoveReport:  # fmt: skip
    """Requests (move id -> node) against the API's move history. ``ambiguous``: node -> requests
    whose answer was lost (the server died): that many unrequested moves of the node are allowed.
    ``before``: ids that existed before the campaign (ignored)."""
    ids = [int(m["id"]) for m in history]
    by_id = {int(m["id"]): m for m in history}
    dup = sorted({i for i in ids if ids.count(i) > 1})
    lost = sorted(i for i in requested if i not in by_id)
    unfinished = sorted(i for i in requested if i in by_id and by_id[i]["status"] not in FINISHED)
    allowed = dict(ambiguous or {})
    old = set(before)
    unreq = []
    for i in sorted(by_id):
        if i in requested or i in old:
            continue
        node = by_id[i]["node"]
        if allowed.get(node, 0) > 0:
            allowed[node] -= 1
        else:
            unreq.append(i)
    open_by_node: dict[str, int] = {}
    for m in history:
        if m["status"] == "running":
            open_by_node[m["node"]] = open_by_node.get(m["node"], 0) + 1
    twice = sorted(n for n, c in open_by_node.items() if c > 1)
    out: dict[str, int] = {}
    for i in requested:
        if i in by_id:
            out[by_id[i]["status"]] = out.get(by_id[i]["status"], 0) + 1
    return MoveReport(lost, dup, unfinished, unreq, twice, out)


def latest_failed(history: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Node -> id of its latest move, for the nodes whose latest move is failed."""
    last: dict[str, Mapping[str, Any]] = {}
    for m in sorted(history, key=lambda m: int(m["id"])):
        last[m["node"]] = m
    return {n: int(m["id"]) for n, m in last.items() if m["status"] == "failed"}


def failed_outside_quarantine(own: Owners, before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
    """Nodes whose latest move was the same failed move in the history read before the sample and
    after it, yet in a tenant's segment in the sample: a failed move leaves its node in quarantine."""
    bad = []
    for node, mid in sorted(before.items()):
        if after.get(node) == mid and node in own and tenants_of(own[node]):
            bad.append(f"{node}: move {mid} failed but the node is in {sorted(tenants_of(own[node]))}")
    return bad


def final_state_errors(history: Sequence[Mapping[str, Any]], own: Owners) -> list[str]:
    """At the end, once nothing moves: each node is where its last move left it: a done move's
    tenant, quarantine after a failed move (the failsafe), either after a cancelled one."""
    last: dict[str, Mapping[str, Any]] = {}
    for m in sorted(history, key=lambda m: int(m["id"])):
        last[m["node"]] = m
    bad = []
    for node, m in sorted(last.items()):
        if node not in own:
            continue
        fab = own[node]
        where = tenants_of(fab) or frozenset({QUARANTINE})
        if m["status"] == "done" and where != {m["to_tenant"]}:
            bad.append(f"{node}: move {m['id']} done to {m['to_tenant']} but the fabrics say {sorted(where)}")
        elif m["status"] == "failed" and where != {QUARANTINE}:
            bad.append(f"{node}: move {m['id']} failed but the node is in {sorted(where)}, not in quarantine")
        elif m["status"] == "cancelled" and where - {m["from_tenant"], QUARANTINE}:
            bad.append(f"{node}: move {m['id']} cancelled but the node is in {sorted(where)}")
    return bad


def convergence(faults: Sequence[float], healthy: Sequence[tuple[float, bool]]) -> list[float | None]:
    """For each fault (the time its component is back), seconds to the first healthy sample at or
    after it (None: never). ``healthy``: (t, no read error and no disagreement of a resting node)."""
    out: list[float | None] = []
    for tf in faults:
        after = [t for t, ok in healthy if t >= tf and ok]
        out.append(min(after) - tf if after else None)
    return out


def percentile(xs: Sequence[float], p: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]
