"""The offload report read over SSH on the DPU's Arm side (``dpu.offload.<host>.ssh``): the lab's
real sshd (lab/sshd.py) on 127.0.0.1 fronts the local OVN lab (lab/ovn.py: ovn-controller and a
userspace OVS per DPU), and the report built from what ``ovs-appctl dpctl/dump-flows -m`` and
``tc -j -s filter show`` print over SSH equals the one read with the same commands run locally.
Host keys are checked: a mismatched or unknown key is refused before authentication — the
server logs no accepted session and no command ran; ``insecure: true`` is reported by the audit
(``TRANSPORT-INSECURE``)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import FabricError
from gpufabric.engine.audit_run import transport_violations
from gpufabric.fabrics.dpu.audit.report import offload_report
from gpufabric.fabrics.dpu.backend.offload import read_source
from gpufabric.fabrics.dpu.drivers.host.ovs import DpuOvsDriver
from gpufabric.fabrics.dpu.drivers.k8s.nodes import K8sNodeDriver
from gpufabric.fabrics.dpu.drivers.ovn.northbound import OvnNbDriver
from gpufabric.fabrics.dpu.kind import DpuKind
from gpufabric.fabrics.dpu.plan.profiles import port_mac, port_name
from gpufabric.lab.ovn import OvnLab
from gpufabric.lab.sshd import SshServer

pytestmark = pytest.mark.root

NODE = "gpu-a01"
DRIVERS: dict[str, type] = {"dpu-ovsdb": DpuOvsDriver, "ovn-nb": OvnNbDriver, "k8s-nodes": K8sNodeDriver}


@dataclass
class World:
    root: Path
    lab: OvnLab
    sshd: SshServer

    def ssh(self, **over: Any) -> dict[str, Any]:
        return {"host": self.sshd.host, "port": self.sshd.port, "user": self.sshd.username,
                "key_file": str(self.sshd.client_key), "known_hosts": str(self.sshd.known_hosts)} | over  # fmt: skip

    def backend(self, ssh: dict[str, Any] | None) -> Any:
        section = self.lab.fabrics_section()
        if ssh is not None:
            section["offload"][NODE] = section["offload"][NODE] | {"ssh": ssh}
        return DpuKind().build(section, DRIVERS.__getitem__, {})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("dpussh")
    lab = OvnLab(root / "ovn", prefix=f"gfs{os.getpid() % 1000}")
    sshd = SshServer(root / "ssh")
    try:
        lab.up([NODE])
        sshd.start()
        name, mac = port_name(NODE, "pf0vf1"), port_mac(NODE, "pf0vf1")
        nbctl = ["ovn-nbctl", f"--db={lab.nb}"]
        subprocess.run([*nbctl, "ls-add", "gf-acme", "--", "lsp-add", "gf-acme", name, "--",
                        "lsp-set-addresses", name, f"{mac} 10.98.0.1"], check=True, capture_output=True)  # fmt: skip
        lab.add_pod(NODE, "pf0vf1", name, mac, "10.98.0.1/24")
        yield World(root, lab, sshd)
    finally:
        sshd.stop()
        lab.down()


def _traffic(world: World) -> None:
    pod = world.lab.status()["pods"][f"{NODE}/pf0vf1"]
    subprocess.run(["ip", "netns", "exec", pod, "ping", "-c", "2", "-i", "0.2", "-W", "1", "10.98.0.9"], capture_output=True)


def _report(backend: Any) -> dict[str, Any]:
    src = backend.offload[NODE]
    node = read_source(backend, NODE, src, "BlueField-2")
    lsps = {p.name: p for p in backend.ovn.read()}
    return {"node": node, "report": offload_report([node], lsps, {NODE: "acme"})}


def test_report_over_ssh_equals_the_local_one(world: World) -> None:
    local, remote = world.backend(None), world.backend(world.ssh())
    assert set(remote.offload_ssh) == {NODE} and remote.transport_notes() == ()
    before = world.sshd.accepted()
    for _ in range(5):  # flows may expire between reads: bracket the SSH read by two equal local reads
        _traffic(world)
        a = _report(local)
        over = _report(remote)
        b = _report(local)
        if a == b:
            break
    else:
        pytest.fail("the local reads never agreed (flows kept changing)")
    assert over == a
    node, rep = over["node"], over["report"]
    assert len(node.flows) > 0 and all(f.path == "datapath" for f in node.flows)  # userspace datapath
    assert (NODE, "acme") in {(r["node"], r["tenant"]) for r in rep["rows"]}
    assert remote.offload_ssh[NODE].commands >= 2  # dump-flows + tc per bound representor
    assert world.sshd.accepted() - before == 1  # one connection, reused for every command
    remote.close()


def test_mismatched_or_unknown_host_key_refused_before_any_command(world: World) -> None:
    other = world.root / "otherkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    pub = other.with_suffix(".pub").read_text().split()
    wrong = world.root / "known_hosts.wrong"
    wrong.write_text(f"[{world.sshd.host}]:{world.sshd.port} {pub[0]} {pub[1]}\n")
    empty = world.root / "known_hosts.empty"
    empty.write_text("")
    before = world.sshd.accepted()
    for known, says in ((wrong, "does not match known_hosts"), (empty, "is unknown")):
        b = world.backend(world.ssh(known_hosts=str(known)))
        with pytest.raises(FabricError) as ei:
            _report(b)
        assert f"SSH to the DPU of {NODE}: host key of 127.0.0.1:{world.sshd.port} {says}" in ei.value.message
        assert "nothing run" in ei.value.message and b.offload_ssh[NODE].commands == 0
    assert world.sshd.accepted() == before  # no session was ever authenticated


def test_insecure_is_explicit_and_reported(world: World) -> None:
    ssh = world.ssh(insecure=True)
    ssh.pop("known_hosts")
    b = world.backend(ssh)
    assert len(_report(b)["node"].iface_ids) == 1 and b.offload_ssh[NODE].commands == 2  # it works, and is reported
    v = transport_violations([("dpu", b)])
    assert [(x.invariant, x.device, x.resource) for x in v] == [("TRANSPORT-INSECURE", NODE, "transport:ssh.insecure")]
    assert "host key not checked (insecure: true)" in v[0].message
    b.close()
