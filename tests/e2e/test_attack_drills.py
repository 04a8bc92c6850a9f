"""Attack drills on the real lab, driven as a tenant with root on a leased (or once-leased)
node would, each asserting detected/refused and that nothing leaked.

Leaks are checked independently of gpufabric's drivers: PKey tables read by SMP
(``smpquery`` as the SM node, :meth:`LabEnv.pkey_tables`), OVS tags read with
``ovs-vsctl``, and a ping matrix between the tenants' namespaces. A report table
(drill -> detected/refused -> seconds -> what leaked) is printed at the end of the module
and written to ``$GPUFABRIC_HOME/attack-drills.json``.

Forged SMInfo: ibsim's SMs always answer with their own port GUID, so the drills where an
SM claims the trusted SM's GUID or a victim's run a real rogue OpenSM and replace its
SMInfo answer - only that one - in the SMP reader of the driver under test (everything else,
including the LID it answers from and the topology, is read from the fabric).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import pytest

from gpufabric.audit import AuditInput, registry_for, run_audit
from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.state import FabricState
from gpufabric.domain.values import Guid, VlanId
from gpufabric.engine.fabrics import Fabrics
from gpufabric.fabrics.infiniband.audit.rogue import RoguePolicy, find_rogue_sms
from gpufabric.fabrics.infiniband.drivers.opensm.contain import contain_rogue_sms
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import SmpQuery, SmpReader, SmpValue
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.readers.diags import PortInfo, parse_smpquery_portinfo
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import parse_ibnetdiscover
from gpufabric.fabrics.infiniband.state import SmSeen
from gpufabric.fabrics.infiniband.state.partitions import parse_partitions_conf
from gpufabric.lab.lab import Lab
from gpufabric.store.registry import Registry

from e2e.conftest import LabEnv
from e2e.test_move import nets_of
from support import drivers

pytestmark = pytest.mark.root
LAB_NODES = 10  # gpu-a06..a10: one fresh rogue host per run of the serve-watch drill
REPORT: list[tuple[str, str, float, str]] = []


@pytest.fixture(scope="module", autouse=True)
def report(lab: LabEnv) -> Iterator[None]:
    lab.gfj("node", "move", "gpu-a01", "--to-tenant", "alpha")
    lab.gfj("node", "move", "gpu-a02", "--to-tenant", "beta")
    yield
    rows = [f"{'drill':<46} {'outcome':<10} {'seconds':>8}  leaked"]
    rows += [f"{d:<46} {o:<10} {s:>8.2f}  {leak}" for d, o, s, leak in REPORT]
    print("\n" + "\n".join(rows))
    (lab.home / "attack-drills.json").write_text(
        json.dumps([{"drill": d, "outcome": o, "seconds": round(s, 3), "leaked": leak} for d, o, s, leak in REPORT])
    )


# ---------------------------------------------------------------------- what leaked
def leaks(lab: LabEnv) -> list[str]:
    """Isolation breaches seen by SMP, OVS and ping: [] when alpha and beta stay apart."""
    nets = nets_of(lab)
    tables = lab.pkey_tables()
    out: list[str] = []
    for node, tenant in (("gpu-a01", "alpha"), ("gpu-a02", "beta")):
        for g in lab.guids(node):
            full = {e & 0x7FFF for e in tables.get(g, frozenset()) if e & 0x8000}
            if full != {nets[tenant][1]}:
                out.append(f"{node} {g} full member of {sorted(hex(k) for k in full)}")
        tag = lab.ovs_tag(lab.eth_ports(node)[0])
        if tag != nets[tenant][0]:
            out.append(f"{node} on VLAN {tag}")
    sm = Guid.parse(lab.status["sm_port_guid"])
    for g, entries in tables.items():
        if Guid.parse(g) != sm and 0xFFFF in entries:
            out.append(f"{g} full member of the default partition")
    if lab.ping("gpu-a01", "gpu-a02") or lab.ping("gpu-a02", "gpu-a01"):
        out.append("alpha and beta can ping each other")
    return out


def wait_for(pred: object, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not pred():  # type: ignore[operator]
        assert time.monotonic() - t0 < timeout, f"{what}: not within {timeout}s"
        time.sleep(0.5)
    return time.monotonic() - t0


def audit(lab: LabEnv) -> list[dict[str, object]]:
    return json.loads(lab.gf("audit", "--json", check=False).stdout)["violations"]  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- drills
def test_rogue_sm_with_its_own_sm_key_detected_and_contained(lab: LabEnv) -> None:
    rogue_node = "gpu-a04"  # a quarantined node whose last tenant kept root
    rogue = lab.guids(rogue_node)[0]
    t0 = time.monotonic()
    lab.gfj("lab", "rogue-sm", "--node", rogue_node)  # priority 15 and its own sm_key
    wait_for(
        lambda: any(v["invariant"] == "IB-ROGUE-SM" and v["port"] == rogue for v in audit(lab)), 40, "IB-ROGUE-SM"
    )
    fixed = lab.gfj("reconcile", "--once", "--policy", "repair")
    took = time.monotonic() - t0
    assert fixed["rogue_contained"] == [rogue]
    assert audit(lab) == []
    leaked = leaks(lab)
    REPORT.append(("rogue SM with its own sm_key", "contained", took, ", ".join(leaked) or "nothing"))
    assert leaked == []


class ForgingReader:
    """The driver's SMP reader, with the SMInfo answer of one LID replaced by a forged one."""

    def __init__(self, inner: SmpReader, lid: int, claimed: Guid) -> None:
        self.inner, self.lid, self.claimed = inner, lid, claimed

    def read(self, queries: Sequence[SmpQuery]) -> list[SmpValue | GpufabricError]:
        got = self.inner.read(queries)
        return [
            SmSeen(self.claimed, r.lid, r.priority, r.state, r.description) if q.op == "sminfo" and q.lid == self.lid and isinstance(r, SmSeen) else r
            for q, r in zip(queries, got, strict=True)
        ]  # fmt: skip

    def close(self) -> None:
        self.inner.close()


@dataclass
class Forged:
    driver: OpenSMDriver
    rogue: Guid
    rogue_lid: int
    trusted: Guid
    victim: Guid
    started: float = field(default_factory=time.monotonic)


@pytest.fixture(scope="module")
def forged_rogue(lab: LabEnv) -> Iterator[Forged]:
    """A real rogue OpenSM on gpu-a05; the driver under test reads the lab's fabric."""
    fabrics = Fabrics.load(lab.home / "fabrics.yaml", Registry.from_entry_points())
    drv = drivers.sm(fabrics)
    assert isinstance(drv, OpenSMDriver)
    rogue = Guid.parse(lab.guids("gpu-a05")[0])
    t0 = time.monotonic()
    lab.gfj("lab", "rogue-sm", "--node", "gpu-a05")
    rogue_lid = drv.ports(refresh=True)[rogue].lid
    wait_for(lambda: any(s.lid == rogue_lid for s in drv.observe().sms), 40, "rogue SM answering")
    f = Forged(drv, rogue, rogue_lid, Guid.parse(lab.status["sm_port_guid"]), Guid.parse(lab.guids("gpu-a01")[0]), t0)
    try:
        yield f
    finally:
        drv.close()


def _audit_mismatch(f: Forged, state: FabricState) -> list[str]:
    inp = AuditInput((), (), (), state, settings={"quarantine_vlan": VlanId(4000), "trusted_sm_guids": (f.trusted,)})
    registry = registry_for([InfinibandKind()])
    return [v.port for v in run_audit(inp, only=["IB-SM-GUID-MISMATCH"], registry=registry).violations]


def test_sm_claiming_the_trusted_sm_guid_is_flagged_at_its_own_lid(lab: LabEnv, forged_rogue: Forged) -> None:
    f = forged_rogue
    inner = f.driver.reader
    f.driver.reader = ForgingReader(inner, f.rogue_lid, f.trusted)
    try:
        t0 = time.monotonic()
        ib = f.driver.observe()
        took = time.monotonic() - t0
    finally:
        f.driver.reader = inner
    impostor = [s for s in ib.sms if s.lid == f.rogue_lid]
    assert [(s.guid, s.port_guid) for s in impostor] == [(f.trusted, f.rogue)]  # kept apart from the real one
    assert _audit_mismatch(f, FabricState(slices={"infiniband": ib})) == [str(f.rogue)]
    found = find_rogue_sms(ib, [f.trusted])
    assert [(x.lid, x.port_guid) for x in found] == [(f.rogue_lid, f.rogue)]
    REPORT.append(("SM reporting the trusted SM's GUID", "detected", took, "nothing (not contained here)"))


def test_sm_claiming_a_victims_guid_gets_its_own_port_disabled(lab: LabEnv, forged_rogue: Forged) -> None:
    f = forged_rogue
    fab = Lab(lab.home).ib_fabric()
    layout = parse_partitions_conf(fab.partitions_conf.read_text())
    victim_port = f.driver.ports()[f.victim]
    inner = f.driver.reader
    f.driver.reader = ForgingReader(inner, f.rogue_lid, f.victim)
    try:
        t0 = time.monotonic()
        report = contain_rogue_sms(f.driver, layout, RoguePolicy.CONTAIN)
        took = time.monotonic() - t0
    finally:
        f.driver.reader = inner
    assert [x.guid for x in report.findings] == [f.victim]  # what it claimed ...
    assert report.contained == (f.rogue,)  # ... and what was cut off: where it answered from
    assert victim_port.switch_lid is not None and victim_port.switch_port is not None
    info = parse_smpquery_portinfo(
        f.driver.diag.run(["smpquery", "portinfo", str(victim_port.switch_lid), str(victim_port.switch_port)])
    )
    assert info.phys_state != "Disabled"
    leaked = leaks(lab)
    REPORT.append(("SM reporting a victim's GUID", "contained", took, ", ".join(leaked) or "nothing"))
    assert leaked == []


def _ns(lab: LabEnv, node: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", lab.node(node)["netns"], *args], capture_output=True, text=True, timeout=30, check=check
    )


# Raw 802.1Q frames (this kernel has no 8021q module for VLAN sub-interfaces): the sender
# writes tagged frames with a marker payload on the node's NIC with an AF_PACKET socket; the
# receiver captures on the target node's NIC, first checking it sees its own probe frame.
_RAW = r"""
import socket, struct, sys, time
mode, nic, marker = sys.argv[1], sys.argv[2], sys.argv[3].encode()
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((nic, 0))
mac = s.getsockname()[4]
def frame(vlan, payload):
    tag = struct.pack("!HH", 0x8100, vlan) if vlan else b""
    return b"\xff" * 6 + mac + tag + struct.pack("!H", 0x88B5) + payload.ljust(46, b"\0")
if mode == "send":
    for vlan in map(int, sys.argv[4:]):
        for _ in range(5):
            s.send(frame(vlan, marker))
            time.sleep(0.05)
    sys.exit(0)
s.settimeout(0.2)
probe = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)  # another socket: a socket never sees its own frames
probe.bind((nic, 0))
probe.send(frame(0, b"probe-" + marker))
seen_probe, seen, end = False, False, time.monotonic() + float(sys.argv[4])
while time.monotonic() < end and not seen:
    try:
        data = s.recv(2048)
    except socket.timeout:
        continue
    seen_probe |= b"probe-" + marker in data
    seen |= marker in data and b"probe-" + marker not in data
print("probe" if seen_probe else "no-probe", "SEEN" if seen else "clean", flush=True)
"""


def test_vlan_tagged_frames_from_the_tenant_port_reach_nobody(lab: LabEnv) -> None:
    """Root on alpha's gpu-a01 writes 802.1Q-tagged frames for beta's VLAN and the quarantine
    VLAN into its NIC; captures on beta's gpu-a02 and quarantined gpu-a03 must not see them."""
    nets = nets_of(lab)
    marker = f"gf-drill-{time.monotonic_ns()}"
    t0 = time.monotonic()
    listeners = {
        n: subprocess.Popen(
            ["ip", "netns", "exec", lab.node(n)["netns"], sys.executable, "-c", _RAW, "recv",
             lab.node(n)["ethernet"][0]["nic"], marker, "4"],
            stdout=subprocess.PIPE, text=True,
        )
        for n in ("gpu-a02", "gpu-a03")
    }  # fmt: skip
    time.sleep(1.0)
    nic = lab.node("gpu-a01")["ethernet"][0]["nic"]
    _ns(lab, "gpu-a01", sys.executable, "-c", _RAW, "send", nic, marker, str(nets["beta"][0]), "4000", "1")
    results = {n: p.communicate(timeout=30)[0].split() for n, p in listeners.items()}
    took = time.monotonic() - t0
    assert all(r[0] == "probe" for r in results.values()), results  # each capture really works
    leaked = [f"{n} received the tagged frames" for n, r in results.items() if r[1] == "SEEN"] + leaks(lab)
    REPORT.append(("VLAN-tagged frames from the tenant's port", "dropped", took, ", ".join(leaked) or "nothing"))
    assert leaked == []


def test_ping_sweep_toward_other_tenants_reaches_nobody(lab: LabEnv) -> None:
    others = [n["name"] for n in lab.status["nodes"] if n["name"] != "gpu-a01"]
    t0 = time.monotonic()
    reached = [n for n in others if lab.ping("gpu-a01", n)]
    took = time.monotonic() - t0
    REPORT.append((f"ping/ARP sweep from alpha to {len(others)} nodes", "refused", took, ", ".join(reached) or "nothing"))
    assert reached == []


def test_rewritten_node_description_cannot_move_a_guid(lab: LabEnv) -> None:
    fab = Lab(lab.home).ib_fabric()
    sm = lab.status["sm_node"]
    real = fab.run_tool(["ibnetdiscover"], sim_host=sm)
    before = lab.gfj("node", "list")
    # root on gpu-a03 sets its HCA's node description to claim a second HCA of alpha's gpu-a01
    forged = lab.home / "forged.topology"
    assert '"gpu-a03 mlx5_0"' in real
    forged.write_text(real.replace('"gpu-a03 mlx5_0"', '"gpu-a01 mlx5_1"'))
    t0 = time.monotonic()
    p = lab.gf("inventory", "import", str(forged), "--format", "ibnetdiscover", "--json")
    took = time.monotonic() - t0
    guid = lab.guids("gpu-a03")[0]
    held = [(h["port_guid"], h["was"], h["node"]) for h in json.loads(p.stdout)["pending"]]
    assert held == [(guid, "gpu-a03", "gpu-a01")], p.stdout  # held, reported, not written (issue 31)
    sm_host = lab.status["sm_node"].split()[0]  # the rest of the import is written: the SM host joins
    assert [n for n in lab.gfj("node", "list") if n["name"] != sm_host] == [n for n in before if n["name"] != sm_host]
    leaked = leaks(lab)
    REPORT.append(("rewritten node description before an import", "held", took, ", ".join(leaked) or "nothing"))
    assert leaked == []


HOSTILE = [
    ("reserved tenant name with a newline", ["tenant", "create", "quarantine\n"]),
    ("rich markup in a name", ["network", "create", "[/x]", "--tenant", "alpha"]),
    ("lease id beyond 64 bits", ["lease", "delete", "99999999999999999999"]),
    ("lease end without a timezone", ["lease", "create", "--tenant", "beta", "--node", "gpu-a03", "--end", "2030-01-01T00:00"]),
    ("lease of the SM host", ["lease", "create", "--tenant", "beta", "--node", "sm-01"]),
]  # fmt: skip


def test_hostile_inputs_refused_and_nothing_written(lab: LabEnv) -> None:
    def snapshot() -> tuple[object, ...]:
        nodes = lab.gfj("node", "list")
        tags = {n: lab.ovs_tag(lab.eth_ports(n)[0]) for n in ("gpu-a01", "gpu-a02", "gpu-a03")}
        return nodes, lab.gfj("lease", "list"), lab.gfj("tenant", "list"), lab.gfj("network", "list"), tags

    # the SM host enters the store from an ibnetdiscover import: marked maintenance, never leasable
    fab = Lab(lab.home).ib_fabric()
    topo = lab.home / "real.topology"
    topo.write_text(fab.run_tool(["ibnetdiscover"], sim_host=lab.status["sm_node"]))
    imported = lab.gfj("inventory", "import", str(topo), "--format", "ibnetdiscover")
    sm_host = lab.status["sm_node"].split()[0]
    assert imported["sm_hosts"] == [sm_host]
    before, tables = snapshot(), lab.pkey_tables()
    t0 = time.monotonic()
    for what, args in HOSTILE:
        args = [a.replace("sm-01", sm_host) for a in args]
        p = lab.gf(*args, check=False)
        assert p.returncode == 2, (what, p.stdout, p.stderr)
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, (what, p.stderr)
    took = time.monotonic() - t0
    assert snapshot() == before
    assert lab.pkey_tables() == tables
    REPORT.append((f"{len(HOSTILE)} hostile inputs (CLI)", "refused", took, "nothing written"))


# The serve-watch drill's runs, one fresh rogue host each: 3 in `make test` (a median of 3
# still discards one outlier each side), all 5 (gpu-a06..a10) in `make test-full`
# (GPUFABRIC_TEST_FULL=1). Each run proves detection and containment on its own host.
WATCH_NODES = [f"gpu-a{n:02d}" for n in range(6, 11 if os.environ.get("GPUFABRIC_TEST_FULL") == "1" else 9)]


def test_ipoib_group_comes_with_the_lease_and_goes_with_the_move_out(lab: LabEnv) -> None:
    """A lease's partition carries ``ipoib``: ``saquery -g`` on the leased node (the SA shows a
    group only to a port of its partition) lists its broadcast group; after the lease ends
    (the move out to quarantine) the partition and its group are gone."""
    from gpufabric.fabrics.infiniband.state.ipoib import broadcast_mgid, parse_saquery_groups

    fab = Lab(lab.home).ib_fabric()
    lab.gf("tenant", "create", "gamma")
    lab.gf("network", "create", "gamma-net", "--tenant", "gamma")
    pkey = nets_of(lab)["gamma"][1]
    mgid = broadcast_mgid(pkey)

    def groups() -> set[str]:
        return {g.mgid for g in parse_saquery_groups(fab.run_tool(["saquery", "-g"], sim_host="gpu-a03 mlx5_0"))}

    t0 = time.monotonic()
    created = lab.gfj("lease", "create", "--tenant", "gamma", "--node", "gpu-a03", "--network", "gamma-net")
    assert mgid in groups(), (mgid, groups())
    lease = next(x for x in lab.gfj("lease", "list") if x["node"] == "gpu-a03" and x["end"] is None)
    lab.gfj("lease", "delete", str(lease["id"]))
    assert groups() == {"ff12:401b:ffff::ffff:ffff"}  # only the default partition's
    assert created["moves"][0]["to_tenant"] == "gamma"
    leaked = leaks(lab)
    REPORT.append(("IPoIB group with a lease, gone after it", "verified", time.monotonic() - t0, ", ".join(leaked) or "nothing"))
    assert leaked == []


class DecoyReader:
    """The driver's SMP reader with one port's MasterSMLID replaced by a LID no port has (a
    decoy a tenant's host could report): a finding containment cannot place."""

    def __init__(self, inner: SmpReader, lid: int, decoy: int = 999) -> None:
        self.inner, self.lid, self.decoy = inner, lid, decoy

    def read(self, queries: Sequence[SmpQuery]) -> list[SmpValue | GpufabricError]:
        got = self.inner.read(queries)
        return [
            replace(r, sm_lid=self.decoy) if q.op == "portinfo" and q.lid == self.lid and isinstance(r, PortInfo) else r
            for q, r in zip(queries, got, strict=True)
        ]  # fmt: skip

    def close(self) -> None:
        self.inner.close()


def test_decoy_finding_does_not_stop_containment_of_the_real_rogue(lab: LabEnv) -> None:
    fabrics = Fabrics.load(lab.home / "fabrics.yaml", Registry.from_entry_points())
    drv = drivers.sm(fabrics)
    assert isinstance(drv, OpenSMDriver)
    fab = Lab(lab.home).ib_fabric()
    layout = parse_partitions_conf(fab.partitions_conf.read_text())
    rogue = Guid.parse(lab.guids("gpu-a03")[0])
    t0 = time.monotonic()
    lab.gfj("lab", "rogue-sm", "--node", "gpu-a03")
    rogue_lid = drv.ports(refresh=True)[rogue].lid
    wait_for(lambda: any(s.lid == rogue_lid for s in drv.observe().sms), 40, "rogue SM answering")
    decoy_port = drv.ports()[Guid.parse(lab.guids("gpu-a02")[0])]
    drv.reader = DecoyReader(drv.reader, decoy_port.lid)
    try:
        report = contain_rogue_sms(drv, layout, RoguePolicy.CONTAIN)
    finally:
        drv.reader = drv.reader.inner  # type: ignore[attr-defined]
        drv.close()
    took = time.monotonic() - t0
    assert report.contained == (rogue,), (report.findings, report.alerts)
    assert [f.lid for f, _ in report.alerts] == [999]
    leaked = leaks(lab)
    REPORT.append(("rogue SM + decoy MasterSMLID 999", "contained", took, ", ".join(leaked) or "nothing"))
    assert leaked == []


def _switch_port(lab: LabEnv, switch_guid: Guid, switch_port: int) -> tuple[int, str]:
    """(the switch's LID now, its port's physical state), read by SMP as the SM node. By the
    switch's GUID: a rogue SM that took over reassigns LIDs, so a LID read before is stale."""
    fab = Lab(lab.home).ib_fabric()
    sm = lab.status["sm_node"]
    sw = parse_ibnetdiscover(fab.run_tool(["ibnetdiscover", "-p"], sim_host=sm)).node(switch_guid)
    assert sw is not None and sw.lid is not None, f"switch {switch_guid} not discovered"
    out = fab.run_tool(["smpquery", "portinfo", str(sw.lid), str(switch_port)], sim_host=sm)
    return sw.lid, parse_smpquery_portinfo(out).phys_state


def _started(pid: int) -> float:
    """A process's start, on the time.monotonic() clock (both count from boot on Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    return ticks / os.sysconf("SC_CLK_TCK")


def _sminfo(fab: object, sm: str) -> str:
    try:
        return str(fab.run_tool(["sminfo"], sim_host=sm))  # type: ignore[attr-defined]
    except GpufabricError:  # the master it names is being cut off or restarted
        return ""


def _ca_ports(lab: LabEnv) -> set[Guid] | None:
    """CA ports the SM node discovers now (None: discovery failed mid-transition)."""
    fab = Lab(lab.home).ib_fabric()
    try:
        topo = parse_ibnetdiscover(fab.run_tool(["ibnetdiscover", "-p"], sim_host=lab.status["sm_node"]))
    except GpufabricError:
        return None
    return {p.port_guid for n in topo.cas() for p in n.ports if p.port_guid is not None}


@pytest.mark.timeout(1200)
def test_rogue_sm_watch_in_serve_detects_and_contains_in_seconds(lab: LabEnv) -> None:
    """``gpufabric serve`` with reconcile at its default 30 s: the watch (every 0.5 s: SMInfo of
    the master + MasterSMLID of a sample of ports) wakes reconcile, which contains the rogue.
    From the rogue opensm's start (/proc/PID/stat): detected = the watch's line on serve's output;
    contained = the rogue's port no longer discovered by the SM node, its switch port read
    Disabled by SMP (independently of serve). Median of the runs, one fresh rogue host each
    (ibsim never retrains a link that was disabled and enabled again)."""
    from statistics import median

    from gpufabric.lab.procs import stop_pid
    from gpufabric.lab.serve import serving

    fab = Lab(lab.home).ib_fabric()
    sm = lab.status["sm_node"]
    sm_guid = lab.status["sm_port_guid"].lower().replace("0x", "").lstrip("0")
    out = lab.home / "serve-watch.log"
    detect: list[float] = []
    contain: list[float] = []
    with out.open("wb") as log, serving(lab.env, "--policy", "repair", output=log):  # --interval: default 30 s
        time.sleep(3)  # the first reconcile pass (at start) is over: the next would come 30 s later
        for node in WATCH_NODES:
            rogue = Guid.parse(lab.guids(node)[0])
            peer = parse_ibnetdiscover(fab.run_tool(["ibnetdiscover", "-p"], sim_host=sm)).peer(rogue, 1)
            assert peer is not None and peer.port_guid is not None
            offset = out.stat().st_size
            pid = lab.gfj("lab", "rogue-sm", "--node", node)["rogue_pid"]
            t0 = _started(pid)  # the rogue opensm's own start (the CLI around it takes seconds here)
            seen: float | None = None
            while True:
                if seen is None and b"sm-watch:" in out.read_bytes()[offset:]:
                    seen = time.monotonic() - t0
                seen_cas = _ca_ports(lab)
                if seen_cas is not None and rogue not in seen_cas:  # its link is down: the SM node reaches it no more
                    break
                assert time.monotonic() - t0 < 45, f"{node} not contained within 45 s: serve said {out.read_bytes()[-1500:]!r}"
                time.sleep(0.25)
            contain.append(time.monotonic() - t0)
            assert seen is not None, out.read_bytes()[offset:][-800:]
            detect.append(seen)
            assert _switch_port(lab, peer.port_guid, peer.port)[1] == "Disabled"  # cut at its own switch port
            stop_pid(pid)  # the rogue we started, by its PID
            (fab.run_dir / f"rogue-{node}_mlx5_0.pid").unlink(missing_ok=True)
            wait_for(lambda: sm_guid in _sminfo(fab, sm), 60, "trusted SM master again")
            print(f"{node}: detect {detect[-1]:.2f}s contain {contain[-1]:.2f}s", flush=True)
            time.sleep(3)  # the containment's own verification is over
        wait_for(lambda: audit(lab) == [], 120, "audit clean after the drills")
    leaked = leaks(lab)
    print(f"\nsm-watch: detect {[round(x, 2) for x in detect]} contain {[round(x, 2) for x in contain]}")
    n = len(WATCH_NODES)
    REPORT.append((f"rogue SM, serve watch: detect (median of {n})", "detected", median(detect), "-"))
    REPORT.append((f"rogue SM, serve watch: contain (median of {n})", "contained", median(contain), ", ".join(leaked) or "nothing"))
    assert median(detect) <= 5.0 and median(contain) <= 10.0
    assert leaked == []
