"""The contracts of the DPU fabric's three drivers (``fabrics/dpu/drivers/base.py``): same
scenarios, same assertions, over each implementation and transport the tests can run.

* OVN northbound (:class:`OvnDriver`): ``OvnNbDriver`` against a real OVN central (NB, SB and
  ``ovn-northd``, tests/support/tls_ovsdb.py) over its ``unix:`` socket and over ``ssl:``;
* Kubernetes Nodes (:class:`NodeLabelDriver`): ``K8sNodeDriver`` built from its section against
  ``kmock``'s apiserver emulator, and ``SplitK8sDriver`` over two of them (host nodes on one
  cluster, DPU nodes on the other);
* the DPU host's OVS (:class:`HostOvsDriver`): ``DpuOvsDriver`` against a real ``ovsdb-server``
  and ``ovs-vswitchd`` over ``unix:`` and over ``ssl:``; its commands on the DPU's Arm side
  (:class:`CommandRunner`): ``SshRunner`` against the lab's real sshd (lab/sshd.py), with host
  keys checked and with ``insecure: true``; the DPU's mode and firmware (:class:`FactsReader`):
  ``MstReader`` with ``flint`` and with ``mlxfwmanager`` on the lab's stand-in of NVIDIA's tools
  (lab/mlxstub.py, in the formats of the recorded real outputs), run here and over the lab's sshd.

Each suite: what ``apply`` sets is in its read-back, in ``read()`` and on the server (read
without the driver); a removal likewise; what the driver does not manage is left alone; a bad
configuration is refused with a one-line :class:`ConfigError` naming its field; a device that
does not answer or refuses is a :class:`FabricError`.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError, FabricError
from gpufabric.fabrics.dpu.drivers.base import CommandRunner, FactsReader, HostOvsDriver, NodeLabelDriver, OvnDriver
from gpufabric.fabrics.dpu.drivers.host.mst import MstReader
from gpufabric.fabrics.dpu.drivers.host.ovs import DpuOvsDriver
from gpufabric.fabrics.dpu.drivers.host.sshrun import SshRunner
from gpufabric.fabrics.dpu.drivers.k8s.nodes import K8sNodeDriver, SplitK8sDriver
from gpufabric.fabrics.dpu.drivers.ovn.northbound import OvnNbDriver
from gpufabric.fabrics.dpu.entries import DpuMode
from gpufabric.fabrics.dpu.entries.info import DpuInfo
from gpufabric.fabrics.dpu.plan.profiles import DPU_HOST_TAINT, DPU_LABELS, HOST_LABELS, HW_OFFLOAD, TENANT_KEY
from gpufabric.fabrics.dpu.state import Label, LogicalPort, OvsSetting, Taint
from gpufabric.lab import mlxstub
from gpufabric.lab.sshd import SshServer

from support.kmock_server import core_api, kmock_apiserver
from support.tls_ovsdb import Pki, TlsOvn, TlsOvs, make_pki

HOST = "gpu-c01"
DPU_NODE = f"{HOST}-bf0"
_seq = itertools.count(1)


def one_line(e: BaseException) -> str:
    text = str(e)
    assert text and "\n" not in text, text
    return text


# ------------------------------------------------------------------ servers (real OVSDB / OVN, kmock)


@dataclass
class Servers:
    pki: Pki
    ovs: TlsOvs
    ovn: TlsOvn


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    root = tmp_path_factory.mktemp("dpu-drivers")
    pki = make_pki(root / "pki")
    ovs = TlsOvs(root / "ovs", pki)
    ovn: TlsOvn | None = None
    try:
        ovn = TlsOvn(root / "ovn", pki)
        yield Servers(pki, ovs, ovn)
    finally:
        if ovn is not None:
            ovn.stop()
        ovs.stop()


# ------------------------------------------------------------------ OVN northbound


@dataclass
class OvnTarget:
    driver: OvnNbDriver
    nbctl: Callable[..., str]  # the server read without the driver


OVN_TRANSPORTS = ["unix", "ssl"]


@pytest.fixture(params=OVN_TRANSPORTS)
def ovn(request: pytest.FixtureRequest, servers: Servers) -> OvnTarget:
    if request.param == "unix":
        return OvnTarget(OvnNbDriver(servers.ovn.unix, 10), servers.ovn.nbctl)
    return OvnTarget(OvnNbDriver(servers.ovn.ssl, 10, tls=servers.pki.client), servers.ovn.nbctl)


def lsp(tenant: str = "alpha") -> LogicalPort:
    n = next(_seq)
    return LogicalPort(f"gf-{tenant}-{HOST}-pf0vf{n}", tenant, HOST, f"0a:58:0a:00:01:{n:02x}", f"pf0vf{n}")


def lsp_names(t: OvnTarget) -> set[str]:
    return set(t.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port").split())


@pytest.mark.root
def test_ovn_meets_the_contract(ovn: OvnTarget) -> None:
    assert isinstance(ovn.driver, OvnDriver)
    assert ovn.driver.transport_notes() == ()  # unix: and ssl: leave nothing open


@pytest.mark.root
def test_ovn_port_set_is_read_back(ovn: OvnTarget) -> None:
    port = lsp()
    got = ovn.driver.apply([], [port])
    assert port in got and port in ovn.driver.read()
    assert port.name in lsp_names(ovn)
    assert ovn.nbctl("--bare", "--columns=addresses", "list", "Logical_Switch_Port", port.name) == port.mac
    ovn.driver.apply([port], [])


@pytest.mark.root
def test_ovn_port_removal_is_read_back_and_the_empty_switch_goes(ovn: OvnTarget) -> None:
    port = lsp("beta")
    ovn.driver.apply([], [port])
    got = ovn.driver.apply([port], [])
    assert port not in got and port not in ovn.driver.read()
    assert port.name not in lsp_names(ovn)
    assert "gf-beta" not in ovn.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split()


@pytest.mark.root
def test_ovn_leaves_switches_it_does_not_own(ovn: OvnTarget) -> None:
    ovn.nbctl("--may-exist", "ls-add", "site-infra", "--", "--may-exist", "lsp-add", "site-infra", "infra-p0")
    port = lsp()
    ovn.driver.apply([], [port])
    ovn.driver.apply([port], [])
    assert all(p.switch.startswith("gf-") for p in ovn.driver.read())
    assert "infra-p0" in lsp_names(ovn)


@pytest.mark.root
def test_ovn_a_port_the_db_refuses_is_a_fabric_error_and_nothing_stays(ovn: OvnTarget) -> None:
    port = LogicalPort(f"gf-alpha-{HOST}-bad{next(_seq)}", "alpha", HOST, "not-a-mac", "pf0vf9")
    with pytest.raises(FabricError):
        ovn.driver.apply([], [port])
    assert port.name not in lsp_names(ovn)


@pytest.mark.parametrize(
    ("remote", "tls", "field"),
    [
        ("tcp:no-port", False, "dpu.ovn_nb"),
        ("ssl:192.0.2.5:6641", False, "dpu.tls"),
        ("unix:/x.sock", True, "dpu.ovn_nb"),
    ],
    ids=["remote", "ssl-without-tls", "tls-without-ssl"],
)
def test_ovn_bad_configuration_names_its_field(remote: str, tls: bool, field: str, tmp_path: Path) -> None:
    files = make_pki(tmp_path / "pki").client if tls else None
    with pytest.raises(ConfigError) as ei:
        OvnNbDriver(remote, 2, tls=files)
    assert ei.value.field == field and field in one_line(ei.value)


@pytest.mark.root
def test_ovn_unreachable_or_refusing_server_is_a_fabric_error(servers: Servers, tmp_path: Path) -> None:
    with pytest.raises(FabricError):
        OvnNbDriver(f"unix:{tmp_path / 'none.sock'}", 2).read()
    with pytest.raises(FabricError):  # a client certificate the server's CA did not sign
        OvnNbDriver(servers.ovn.ssl, 2, tls=servers.pki.foreign).read()


# ------------------------------------------------------------------ DPU host OVS


@dataclass
class OvsTarget:
    driver: DpuOvsDriver
    vsctl: Callable[..., str]

    def get(self, key: str) -> str:
        column, k = key.split(":", 1)
        return self.vsctl("--if-exists", "get", "Open_vSwitch", ".", f"{column}:{k}").strip('"')


@pytest.fixture(params=["unix", "ssl"])
def ovs(request: pytest.FixtureRequest, servers: Servers) -> Iterator[OvsTarget]:
    if request.param == "unix":
        t = OvsTarget(DpuOvsDriver(HOST, servers.ovs.unix, 10), servers.ovs.vsctl)
    else:
        t = OvsTarget(DpuOvsDriver(HOST, servers.ovs.ssl, 10, tls=servers.pki.client), servers.ovs.vsctl)
    yield t
    t.driver.apply(sorted(t.driver.read()), [])


@pytest.mark.root
def test_ovs_meets_the_contract(ovs: OvsTarget) -> None:
    assert isinstance(ovs.driver, HostOvsDriver)
    assert ovs.driver.transport_notes() == ()


@pytest.mark.root
def test_ovs_setting_is_read_back(ovs: OvsTarget) -> None:
    adds = [OvsSetting(HOST, TENANT_KEY, "alpha"), OvsSetting(HOST, HW_OFFLOAD, "true")]
    got = ovs.driver.apply([], adds)
    assert set(adds) <= got and set(adds) <= ovs.driver.read()
    assert ovs.get(TENANT_KEY) == "alpha" and ovs.get(HW_OFFLOAD) == "true"


@pytest.mark.root
def test_ovs_removal_is_read_back(ovs: OvsTarget) -> None:
    setting = OvsSetting(HOST, TENANT_KEY, "beta")
    ovs.driver.apply([], [setting])
    got = ovs.driver.apply([setting], [])
    assert setting not in got and setting not in ovs.driver.read()
    assert ovs.get(TENANT_KEY) == ""


@pytest.mark.root
def test_ovs_keys_it_does_not_manage_are_neither_read_nor_touched(ovs: OvsTarget) -> None:
    ovs.vsctl("set", "Open_vSwitch", ".", "external_ids:site-owner=ops")
    ovs.driver.apply([], [OvsSetting(HOST, TENANT_KEY, "alpha")])
    assert {s.key for s in ovs.driver.read()} == {TENANT_KEY}
    assert ovs.get("external_ids:site-owner") == "ops"


@pytest.mark.parametrize(
    ("remote", "field"),
    [("ovsdb.example:6640", f"dpu.ovsdb.{HOST}"), ("ssl:192.0.2.11:6640", "dpu.tls")],
    ids=["remote", "ssl-without-tls"],
)
def test_ovs_bad_configuration_names_its_field(remote: str, field: str) -> None:
    with pytest.raises(ConfigError) as ei:
        DpuOvsDriver(HOST, remote, 2)
    assert ei.value.field == field and field in one_line(ei.value)


@pytest.mark.root
def test_ovs_unreachable_or_refusing_server_is_a_fabric_error(servers: Servers, tmp_path: Path) -> None:
    with pytest.raises(FabricError):
        DpuOvsDriver(HOST, f"unix:{tmp_path / 'none.sock'}", 2).read()
    before = servers.ovs.vsctl("--if-exists", "get", "Open_vSwitch", ".", f"{TENANT_KEY}")
    with pytest.raises(FabricError):  # trusts another CA than the server's
        DpuOvsDriver(HOST, servers.ovs.ssl, 2, tls=servers.pki.wrong_ca).apply([], [OvsSetting(HOST, TENANT_KEY, "x")])
    assert servers.ovs.vsctl("--if-exists", "get", "Open_vSwitch", ".", f"{TENANT_KEY}") == before


# ------------------------------------------------------------------ Kubernetes Nodes


@dataclass
class K8sTarget:
    driver: K8sNodeDriver | SplitK8sDriver
    api_of: Callable[[str], Any]  # node -> the CoreV1 API of the cluster that registers it

    def labels(self, node: str) -> dict[str, str]:
        return dict(self.api_of(node).read_node(node).metadata.labels or {})

    def taints(self, node: str) -> set[tuple[str, str]]:
        spec = self.api_of(node).read_node(node).spec
        return {(t.key, t.effect) for t in (spec.taints or [])} if spec is not None else set()


def _register(api: Any, name: str) -> None:
    api.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"rack": "c"}},
                     "spec": {"taints": [{"key": "site/maintenance", "value": "no", "effect": "PreferNoSchedule"}]}})  # fmt: skip


@pytest.fixture(scope="module", params=["kmock", "split-kmock"])
def k8s(request: pytest.FixtureRequest) -> Iterator[K8sTarget]:
    with kmock_apiserver() as url_a, kmock_apiserver() as url_b:
        a, b = core_api(url_a), core_api(url_b)
        if request.param == "kmock":
            _register(a, HOST)
            _register(a, DPU_NODE)
            yield K8sTarget(K8sNodeDriver.from_section({"host": url_a}), lambda n: a)
        else:
            _register(a, HOST)
            _register(b, DPU_NODE)
            drv = SplitK8sDriver(
                K8sNodeDriver.from_section({"host": url_a}),
                K8sNodeDriver.from_section({"host": url_b}, "dpu.kubernetes_dpu"),
            )
            yield K8sTarget(drv, lambda n: b if n == DPU_NODE else a)


def role_items() -> list[Label | Taint]:
    return [
        *(Label(HOST, k, "") for k in HOST_LABELS),
        Taint(HOST, DPU_HOST_TAINT.key, DPU_HOST_TAINT.value, DPU_HOST_TAINT.effect),
        *(Label(DPU_NODE, k, "") for k in DPU_LABELS),
    ]


def test_k8s_meets_the_contract(k8s: K8sTarget) -> None:
    assert isinstance(k8s.driver, NodeLabelDriver)
    assert k8s.driver.api is not None  # it can cordon and drain
    assert k8s.driver.transport_notes() == ()  # http on loopback only


def test_k8s_labels_and_taint_set_are_read_back(k8s: K8sTarget) -> None:
    items = role_items()
    labels, taints = k8s.driver.apply([], items)
    assert set(items) <= set(labels) | set(taints)
    r_labels, r_taints = k8s.driver.read()
    assert set(items) <= set(r_labels) | set(r_taints)
    assert set(HOST_LABELS) <= set(k8s.labels(HOST)) and set(DPU_LABELS) <= set(k8s.labels(DPU_NODE))
    assert (DPU_HOST_TAINT.key, DPU_HOST_TAINT.effect) in k8s.taints(HOST)
    k8s.driver.apply(items, [])


def test_k8s_removal_is_read_back_and_unmanaged_ones_stay(k8s: K8sTarget) -> None:
    items = role_items()
    k8s.driver.apply([], items)
    labels, taints = k8s.driver.apply(items, [])
    assert not set(items) & (set(labels) | set(taints))
    assert k8s.driver.read() == (frozenset(), frozenset())
    for node in (HOST, DPU_NODE):
        assert k8s.labels(node) == {"rack": "c"}
        assert k8s.taints(node) == {("site/maintenance", "PreferNoSchedule")}


def test_k8s_read_of_named_nodes_skips_unregistered_ones(k8s: K8sTarget) -> None:
    k8s.driver.apply([], role_items())
    labels, _ = k8s.driver.read([HOST, "gpu-unknown"])
    assert {x.k8s_node for x in labels} == {HOST}
    k8s.driver.apply(role_items(), [])


def test_k8s_label_on_an_unregistered_node_is_refused_naming_it(k8s: K8sTarget) -> None:
    with pytest.raises(FabricError) as ei:
        k8s.driver.apply([], [Label("gpu-unknown", HOST_LABELS[0], "")])
    assert "gpu-unknown" in one_line(ei.value)


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"host": "http://127.0.0.1:1", "colour": "blue"}, "dpu.kubernetes.colour"),
        ({"host": "http://127.0.0.1:1", "verify_ssl": "yes"}, "dpu.kubernetes.verify_ssl"),
        ({"host": "http://127.0.0.1:1", "insecure": "no"}, "dpu.kubernetes.insecure"),
        ({}, "dpu.kubernetes.host"),
        ("http://127.0.0.1:1", "dpu.kubernetes"),
    ],
    ids=["unknown-key", "verify_ssl", "insecure", "no-host", "not-a-mapping"],
)
def test_k8s_bad_section_names_its_field(section: Any, field: str) -> None:
    with pytest.raises(ConfigError) as ei:
        K8sNodeDriver.from_section(section)
    assert ei.value.field == field and field in one_line(ei.value)


def test_k8s_unreachable_api_server_is_a_fabric_error() -> None:
    """Was urllib3's MaxRetryError (the driver wrapped only ApiException): now a FabricError."""
    drv = K8sNodeDriver.from_section({"host": "http://127.0.0.1:1"})
    with pytest.raises(FabricError, match="kubernetes: reading nodes failed"):
        drv.read()
    with pytest.raises(FabricError, match="kubernetes: patching node gpu-x01") as ei:
        drv.apply([], [Label("gpu-x01", "k8s.ovn.org/dpu-host", "")])
    assert ei.value.device == "gpu-x01"


# ------------------------------------------------------------------ DPU host commands over SSH


@dataclass
class SshTarget:
    sshd: SshServer
    section: dict[str, Any]

    def runner(self, **over: Any) -> SshRunner:
        return SshRunner.from_section(HOST, self.section | over, timeout=10)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = SshServer(tmp_path_factory.mktemp("dpu-sshd"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["known_hosts", "insecure"])
def ssh(request: pytest.FixtureRequest, sshd: SshServer) -> SshTarget:
    section: dict[str, Any] = {"host": sshd.host, "port": sshd.port, "user": sshd.username,
                               "key_file": str(sshd.client_key)}  # fmt: skip
    section |= {"known_hosts": str(sshd.known_hosts)} if request.param == "known_hosts" else {"insecure": True}
    return SshTarget(sshd, section)


@pytest.mark.root
def test_ssh_meets_the_contract(ssh: SshTarget) -> None:
    r = ssh.runner()
    assert isinstance(r, CommandRunner)
    notes = r.transport_notes()
    assert len(notes) == (1 if ssh.section.get("insecure") else 0)  # an unchecked host key is reported
    r.close()


@pytest.mark.root
def test_ssh_runs_each_argument_quoted_and_reads_stdout_over_one_connection(ssh: SshTarget) -> None:
    r = ssh.runner()
    before = ssh.sshd.accepted()
    assert r.run(["printf", "%s|", "a b", "$HOME", "c;d"]) == "a b|$HOME|c;d|"
    assert r.run(["echo", "again"]) == "again\n"
    assert r.commands == 2 and ssh.sshd.accepted() - before == 1
    r.close()


@pytest.mark.root
def test_ssh_failing_command_is_a_one_line_fabric_error_naming_the_dpu(ssh: SshTarget) -> None:
    r = ssh.runner()
    with pytest.raises(FabricError) as ei:
        r.run(["sh", "-c", "echo broken >&2; exit 3"])
    assert HOST in one_line(ei.value) and "(3)" in str(ei.value) and "broken" in str(ei.value)
    r.close()


@pytest.mark.root
def test_ssh_unknown_host_key_is_refused_before_any_command(ssh: SshTarget, tmp_path: Path) -> None:
    if ssh.section.get("insecure"):
        pytest.skip("insecure: true accepts any host key (explicit and reported)")
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    before = ssh.sshd.accepted()
    r = ssh.runner(known_hosts=str(empty))
    with pytest.raises(FabricError) as ei:
        r.run(["true"])
    assert "is unknown" in one_line(ei.value) and r.commands == 0
    assert ssh.sshd.accepted() == before


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"port": 0}, f"dpu.offload.{HOST}.ssh.port"),
        ({"user": ""}, f"dpu.offload.{HOST}.ssh.user"),
        ({"colour": "blue"}, f"dpu.offload.{HOST}.ssh.colour"),
        ({"known_hosts": None}, f"dpu.offload.{HOST}.ssh.known_hosts"),
        ({"insecure": "yes"}, f"dpu.offload.{HOST}.ssh.insecure"),
    ],
    ids=["port", "user", "unknown-key", "no-known_hosts", "insecure"],
)
def test_ssh_bad_section_names_its_field(over: dict[str, Any], field: str, tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("not used")
    key.chmod(0o600)
    known = tmp_path / "known_hosts"
    known.write_text("")
    section = {"host": "192.0.2.21", "user": "root", "key_file": str(key), "known_hosts": str(known)} | over
    with pytest.raises(ConfigError) as ei:
        SshRunner.from_section(HOST, section)
    assert ei.value.field == field and field in one_line(ei.value)


# ------------------------------------------------------------------ DPU host facts (mode, firmware)

DEV = "/dev/mst/mt41686_pciconf0"
INFO = DpuInfo(HOST, "bf0", DpuMode.DPU, DPU_NODE)


@dataclass
class FactsTarget:
    reader: MstReader
    state: Path  # the lab stand-in's state of HOST's DPU (gpufabric.lab.mlxstub)

    def tool(self, *args: str) -> None:
        assert mlxstub.main([str(self.state), *args]) == 0


@pytest.fixture(params=["flint", "mlxfwmanager", "flint-over-ssh"])
def facts(request: pytest.FixtureRequest, tmp_path: Path) -> FactsTarget:
    stub = [sys.executable, "-m", "gpufabric.lab.mlxstub", str(tmp_path / "{host}.json")]
    if request.param == "flint-over-ssh":
        if os.geteuid() != 0:
            pytest.skip("the lab's sshd needs root")
        sshd: SshServer = request.getfixturevalue("sshd")
        ssh = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={sshd.known_hosts}",
               "-i", str(sshd.client_key), "-p", str(sshd.port), f"{sshd.username}@{sshd.host}"]  # fmt: skip
        stub = ssh + stub
    reader = MstReader(stub, DEV, firmware=request.param.removesuffix("-over-ssh"), timeout=20)
    state = tmp_path / f"{HOST}.json"
    mlxstub.write_state(state, mode="embedded", firmware="24.35.2000")
    return FactsTarget(reader, state)


def test_facts_meet_the_contract(facts: FactsTarget) -> None:
    assert isinstance(facts.reader, FactsReader)


def test_facts_mode_and_running_firmware_are_read(facts: FactsTarget) -> None:
    got = facts.reader.read(INFO)
    assert (got.host, got.mode, got.next_mode, got.firmware, got.error) == (
        HOST,
        "embedded",
        "embedded",
        "24.35.2000",
        "",
    )
    assert not got.power_cycle_pending and got.device_type
    mlxstub.write_state(facts.state, mode="nic", firmware="24.35.2000")
    assert facts.reader.read(INFO).mode == "nic"


def test_facts_a_burn_is_pending_until_the_power_cycle(facts: FactsTarget) -> None:
    facts.tool("burn", "24.40.1000")
    got = facts.reader.read(INFO)
    assert (got.firmware, got.flashed_firmware, got.power_cycle_pending) == ("24.35.2000", "24.40.1000", True)
    facts.tool("power-cycle")
    got = facts.reader.read(INFO)
    assert (got.firmware, got.power_cycle_pending) == ("24.40.1000", False)


def test_facts_a_failed_read_is_facts_with_its_error_never_an_exception(facts: FactsTarget) -> None:
    got = facts.reader.read(DpuInfo("gpu-c99", "bf0", DpuMode.DPU, "gpu-c99-bf0"))  # no stand-in state for it
    assert got.mode == "unknown" and got.error and got.host == "gpu-c99"


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"firmware": "mstflint"}, "dpu.mst.firmware"),
        ({"command": "ssh gpu-c01"}, "dpu.mst.command"),
        ({"timeout": 0}, "dpu.mst.timeout"),
        ({"device": ""}, "dpu.mst.device"),
        ({"colour": "blue"}, "dpu.mst.colour"),
    ],
    ids=["firmware", "command", "timeout", "device", "unknown-key"],
)
def test_facts_bad_section_names_its_field(section: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as ei:
        MstReader.from_section(section)
    assert ei.value.field == field and field in one_line(ei.value)
