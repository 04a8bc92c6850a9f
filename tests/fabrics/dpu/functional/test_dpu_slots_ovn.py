"""DPU ports of a shared host (issue 33) on the lab's real OVN (central + a userspace OVS with
ovn-controller per DPU): ``gpu-a01`` leased to infra in ``vm-host`` with slots A (tenant a), B (b),
C (c), each slot's VM a veth "pod" bound by ``iface-id`` to its slot's logical port ``<slot>.bf0``;
``gpu-a02`` leased to a. A's VM pings a's pod on gpu-a02 through Geneve, B's does not; B's slot
moved to quarantine then to a changes only B's logical port (A's and C's NB rows keep their UUIDs);
the offload report read live counts each VM's flows for its slot and tenant."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points

import pytest

from gpufabric.domain.fabric import FabricBackend, FabricKind, Tenancy
from gpufabric.fabrics.dpu.audit.report import offload_report
from gpufabric.fabrics.dpu.drivers.host.collect import read_node_offload
from gpufabric.fabrics.dpu.plan import DpuPlan
from gpufabric.fabrics.dpu.plan.profiles import port_mac, port_name
from gpufabric.fabrics.dpu.state import DpuState
from gpufabric.lab.ovn import OvnLab

from fabrics.dpu.unit.dpu_scenarios import HOST, OTHER, SA, SB, SC, slot_tenancy

pytestmark = pytest.mark.root

VMS = {SA: ("pf0vf2", "10.97.0.11"), SB: ("pf0vf3", "10.97.0.12"), SC: ("pf0vf4", "10.97.0.13")}
OTHER_IP = "10.97.0.2"


@dataclass
class Env:
    lab: OvnLab
    kind: FabricKind[DpuState, DpuState]
    backend: FabricBackend[DpuState]

    def converge(self, t: Tenancy) -> DpuPlan:
        """What the core engine does: diff against a full read, removals then additions."""
        observed = self.backend.observe_for_moves()
        plan = self.kind.diff(self.kind.desired(t), observed)
        assert isinstance(plan, DpuPlan)
        for part in plan.split():
            if not part.empty:
                self.backend.apply(part)
        return plan

    def lsp_rows(self) -> dict[str, tuple[str, str]]:
        """Logical port name -> (its row's UUID, its slot), read with ovn-nbctl."""
        out = subprocess.run(
            [
                "ovn-nbctl",
                f"--db={self.lab.nb}",
                "--bare",
                "--columns=_uuid,name,external_ids",
                "list",
                "Logical_Switch_Port",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rows: dict[str, tuple[str, str]] = {}
        for block in out.strip().split("\n\n"):
            uuid, name, ext = [*block.split("\n"), "", "", ""][:3]
            slot = next((kv.split("=", 1)[1] for kv in ext.split() if kv.startswith("gpufabric-slot=")), "")
            rows[name] = (uuid, slot)
        return rows

    def ping(self, node: str, rep: str, ip: str, attempts: int) -> bool:
        pod = self.lab.status()["pods"][f"{node}/{rep}"]
        for _ in range(attempts):
            if (
                subprocess.run(
                    ["ip", "netns", "exec", pod, "ping", "-c", "1", "-W", "1", ip], capture_output=True
                ).returncode
                == 0
            ):
                return True
        return False


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    lab = OvnLab(tmp_path_factory.mktemp("ovn"), prefix=f"gfs{int(time.time()) % 1000}")
    try:
        lab.up([HOST, OTHER])
        lab.add_pod(OTHER, "pf0vf1", port_name(OTHER, "pf0vf1"), port_mac(OTHER, "pf0vf1"), f"{OTHER_IP}/24")
        for slot, (rep, ip) in VMS.items():
            lab.add_pod(HOST, rep, f"{slot}.bf0", port_mac(slot, "bf0"), f"{ip}/24")
        kinds = {ep.name: ep.load() for ep in entry_points(group="gpufabric.fabrics")}
        drivers = {ep.name: ep.load() for ep in entry_points(group="gpufabric.drivers")}
        kind = kinds["dpu"]()
        backend = kind.build(lab.fabrics_section() | {"timeout": 10}, drivers.__getitem__, {})
        yield Env(lab, kind, backend)
        backend.close()
    finally:
        lab.down()


def test_slot_ports_isolation_slot_move_and_report(env: Env) -> None:
    t = slot_tenancy()
    env.converge(t)
    rows = env.lsp_rows()
    assert {n: s for n, (_, s) in rows.items()} == {
        port_name(HOST, "pf0vf1"): "", port_name(OTHER, "pf0vf1"): "", f"{SA}.bf0": SA, f"{SB}.bf0": SB, f"{SC}.bf0": SC,
    }  # fmt: skip
    fresh = env.backend.observe()
    assert env.kind.diff(env.kind.desired(t), fresh).empty
    assert list(env.kind.audit(t, env.kind.desired(t), fresh)) == []
    # data plane: slot A's VM (tenant a) reaches a's node through Geneve; B's VM (tenant b) does not
    assert env.ping(HOST, VMS[SA][0], OTHER_IP, attempts=8)
    assert not env.ping(HOST, VMS[SB][0], OTHER_IP, attempts=2)
    # the offload report read live: A's VM's flows are counted for slot A and tenant a, no alert
    lsps = {p.name: p for p in fresh.ports}
    st = env.lab.status()["dpus"][HOST]
    node = read_node_offload(HOST, env.lab.ovsdb(HOST), st["appctl"], st["netns"])
    owners = {HOST: "infra", SA: "a", SB: "b", SC: "c"}
    report = offload_report([node], lsps, owners)
    by = {(r["slot"], r["tenant"]): r for r in report["rows"]}
    assert by[(SA, "a")]["datapath_flows"] > 0 and by[(SA, "a")]["hw_flows"] == 0
    assert not [a for a in report["alerts"] if a["kind"] != "offload_table"]
    # B's slot to quarantine: only B's port goes; A's and C's rows are the same rows
    plan = env.converge(slot_tenancy({"a": "a", "b": None, "c": "c"}))
    assert plan.lines() == [f"- lsp gf-b/{SB}.bf0 node={HOST} slot={SB} mac={port_mac(SB, 'bf0')}"]
    after = env.lsp_rows()
    assert f"{SB}.bf0" not in after and all(after[n] == rows[n] for n in rows if n != f"{SB}.bf0")
    # ... then to tenant a: only B's port comes back, in a's switch; B's VM now reaches a's node
    plan = env.converge(slot_tenancy({"a": "a", "b": "a", "c": "c"}))
    assert [c.op for c in plan.changes] == ["add"] and plan.objects() == {"ovn:gf-a"}
    assert all(env.lsp_rows()[n] == rows[n] for n in rows if n != f"{SB}.bf0")
    assert env.ping(HOST, VMS[SB][0], OTHER_IP, attempts=8)
