"""OVSDB and OVN over TLS, for real: ``ovsdb-server`` listening on ``pssl:`` with certificates
made by the test (openssl), the drivers connecting to ``ssl:127.0.0.1:PORT`` with their
``private_key``/``certificate``/``ca_cert`` options and doing a real read and write (checked
over the server's unix socket); a client trusting another CA, and a client whose certificate
another CA signed, are refused and write nothing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from gpufabric.domain.errors import ApplyError, ConfigError, FabricError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.dpu.drivers.host.ovs import DpuOvsDriver
from gpufabric.fabrics.dpu.drivers.ovn.northbound import OvnNbDriver
from gpufabric.fabrics.dpu.kind import DpuKind
from gpufabric.fabrics.dpu.state import LogicalPort, OvsSetting
from gpufabric.fabrics.ethernet.drivers.ovsdb import tls as ovsdb_tls
from gpufabric.fabrics.ethernet.drivers.ovsdb.driver import OvsdbSwitchDriver
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode
from gpufabric.transport.secrets import TlsFiles

from support.tls_ovsdb import Pki, TlsOvn, TlsOvs, make_pki

pytestmark = pytest.mark.root

Q = VlanId(4000)


@dataclass
class Env:
    pki: Pki
    ovs: TlsOvs
    ovn: TlsOvn
    bridge: str
    ports: tuple[str, ...]

    def eth(self, tls: TlsFiles, timeout: float = 10) -> OvsdbSwitchDriver:
        return OvsdbSwitchDriver(self.bridge, self.ovs.ssl, Q, timeout, private_key=tls.private_key,
                                 certificate=tls.certificate, ca_cert=tls.ca_cert)  # fmt: skip

    def tag(self, port: str) -> str:
        return self.ovs.vsctl("get", "Port", port, "tag")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("ovsdb-tls")
    pki = make_pki(root / "pki")
    ovs = TlsOvs(root / "ovs", pki)
    ovn: TlsOvn | None = None
    try:
        ovn = TlsOvn(root / "ovn", pki)
        bridge = f"{ovs.prefix}br"
        ports = (f"{ovs.prefix}p0", f"{ovs.prefix}p1")
        args = ["add-br", bridge, "--", "set", "bridge", bridge, "datapath_type=netdev"]
        for p in ports:
            args += ["--", "add-port", bridge, p, "--", "set", "interface", p, "type=internal"]
        ovs.vsctl(*args)
        yield Env(pki, ovs, ovn, bridge, ports)
    finally:
        if ovn is not None:
            ovn.stop()
        ovs.stop()


# ------------------------------------------------------------------ Ethernet (ovsdbapp / python-ovs)
def test_ethernet_driver_reads_and_writes_over_ssl(env: Env) -> None:
    port = env.ports[0]
    with env.eth(env.pki.client) as d:
        assert d.transport_notes() == ()
        d.apply([EthernetPortConfig(env.bridge, port, PortMode.ACCESS, VlanId(2101))])
        seen = d.observe()
        assert ovsdb_tls.active() == env.pki.client  # python-ovs presented these files
    assert seen.port(port) == EthernetPortConfig(env.bridge, port, PortMode.ACCESS, VlanId(2101))
    assert env.tag(port) == "2101"  # read back over the server's unix socket, not through the driver


@pytest.mark.parametrize(
    ("which", "why"), [("wrong_ca", "certificate verify failed"), ("foreign", "")],
    ids=["client-trusts-another-ca", "client-cert-from-another-ca"],
)  # fmt: skip
def test_ethernet_driver_refused_when_the_ca_does_not_match(env: Env, which: str, why: str) -> None:
    port = env.ports[1]
    before = env.tag(port)
    d = env.eth(getattr(env.pki, which), timeout=3)
    with pytest.raises(FabricError) as ei:
        d.apply([EthernetPortConfig(env.bridge, port, PortMode.ACCESS, VlanId(2102))])
    d.close()
    assert env.ovs.ssl in ei.value.message and why in ei.value.message
    assert env.tag(port) == before  # nothing written


def test_plain_tcp_client_cannot_talk_to_the_ssl_port(env: Env) -> None:
    with pytest.raises(FabricError, match="did not answer|no echo reply"):
        OvsdbSwitchDriver(env.bridge, f"tcp:127.0.0.1:{env.ovs.port}", Q, 2).observe()


def test_a_second_tls_identity_is_refused_while_the_first_is_connected(env: Env) -> None:
    first = env.eth(env.pki.client)
    first.observe()
    try:
        other = env.eth(env.pki.wrong_ca)  # another pool, another identity: python-ovs holds one
        with pytest.raises(ConfigError) as ei:
            other._connect()
        assert ei.value.field == "private_key" and "one per process" in str(ei.value)
        assert ovsdb_tls.active() == env.pki.client  # the live connection keeps its identity
    finally:
        first.close()
    again = env.eth(env.pki.client)
    assert again.observe().switch == env.bridge
    again.close()


# ------------------------------------------------------------------ DPU (ovs-vsctl, ovn-nbctl)
def test_dpu_ovs_driver_reads_and_writes_over_ssl(env: Env) -> None:
    d = DpuOvsDriver("gpu-t01", env.ovs.ssl, 10, tls=env.pki.client)
    setting = OvsSetting("gpu-t01", "external_ids:gpufabric-tenant", "alpha")
    got = d.apply([], [setting])
    assert setting in got and setting in d.read()
    assert env.ovs.vsctl("get", "Open_vSwitch", ".", "external_ids:gpufabric-tenant") == "alpha"
    d.apply([setting], [])
    assert "gpufabric-tenant" not in env.ovs.vsctl("get", "Open_vSwitch", ".", "external_ids")


def test_dpu_ovs_driver_refused_when_the_ca_does_not_match(env: Env) -> None:
    d = DpuOvsDriver("gpu-t01", env.ovs.ssl, 2, tls=env.pki.wrong_ca)
    with pytest.raises(ApplyError, match="ovs-vsctl on ssl:"):
        d.apply([], [OvsSetting("gpu-t01", "external_ids:gpufabric-tenant", "beta")])
    assert env.ovs.vsctl("--if-exists", "get", "Open_vSwitch", ".", "external_ids:gpufabric-tenant") != "beta"


def test_ovn_nb_driver_reads_and_writes_over_ssl_built_from_the_section(env: Env) -> None:
    tls = env.pki.client
    section = {"ovn_nb": env.ovn.ssl, "ovsdb": {"gpu-t01": env.ovs.ssl},
               "tls": {"private_key": tls.private_key, "certificate": tls.certificate, "ca_cert": tls.ca_cert}}
    drivers = {"dpu-ovsdb": DpuOvsDriver, "ovn-nb": OvnNbDriver, "k8s-nodes": object}
    backend = DpuKind().build(section, drivers.__getitem__, {})
    assert backend.transport_notes() == ()  # type: ignore[attr-defined]
    nb = backend.ovn  # type: ignore[attr-defined]
    port = LogicalPort("gf-alpha-gpu-t01-pf0vf1", "alpha", "gpu-t01", "0a:58:0a:00:00:01", "pf0vf1")
    assert port in nb.apply([], [port])
    assert env.ovn.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port") == port.name
    assert port in backend.observe().ports
    nb.apply([port], [])
    assert env.ovn.nbctl("--bare", "--columns=name", "list", "Logical_Switch") == ""


def test_ovn_nb_driver_refused_when_the_ca_does_not_match(env: Env) -> None:
    nb = OvnNbDriver(env.ovn.ssl, 2, tls=env.pki.foreign)
    with pytest.raises(ApplyError, match="ovn-nbctl failed"):
        nb.read()
