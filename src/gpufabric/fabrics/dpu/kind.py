"""``DpuKind``: the DPU fabric's seam implementation (pure) and its ``fabrics.yaml`` section.

Section format (``dpu:`` in fabrics.yaml)::

    dpu:
      ovn_nb: ssl:192.0.2.5:6641                   # OVN northbound remote (required)
      ovsdb:                                       # host node -> its DPU-side OVSDB remote
        gpu-a01: ssl:192.0.2.11:6640
      tls:                                         # required when any remote above is ssl:
        private_key: /etc/gpufabric/ovn/key.pem    # mode 0600 or stricter
        certificate: /etc/gpufabric/ovn/cert.pem
        ca_cert: /etc/gpufabric/ovn/cacert.pem     # the CA the servers' certificates chain to
      kubernetes:                                  # optional; absent: labels/taints not managed
        host: https://api.example:6443             # or kubeconfig: /path (in-cluster otherwise)
        kubeconfig: ~/.kube/config
        verify_ssl: true                           # false: reported by the audit
        ca_cert: /etc/gpufabric/k8s-ca.pem         # optional CA bundle of the API server
        token_file: /etc/gpufabric/k8s.token       # optional bearer token, mode 0600
      kubernetes_dpu: {host: ..., token_file: ...} # optional second cluster of the DPU nodes
                                                   # (same keys; needs kubernetes; see drivers/k8s/nodes.py)
      timeout: 10                                  # seconds per device command
      mst: {command: [...], device: ...}           # DPU mode/firmware reader (drivers/host/mst.py);
                                                   # absent: moves into a dpu-host offering are refused; {verify: false}
                                                   # skips the gate explicitly
      drain: {timeout: 120, retry_every: 2}        # drain of nodes leaving OpenShift (seconds)
      offload: {gpu-a01: {appctl: ..., netns: ..., ssh: {...}}}  # where `offload report` reads each DPU
                                                   # (backend/offload.py; ssh: on its Arm side, drivers/host/sshrun.py)
      capacity: {BlueField-2: {entries: N, source: "..."}}  # offload-table size with its source (audit/capacity.py)

One ``tls`` identity serves every ``ssl:`` remote of the section (the DPU OVSDBs and the OVN
NB). ``tcp:`` remotes are accepted and reported by the audit (``TRANSPORT-INSECURE``, through
:meth:`DpuBackend.transport_notes`); ``unix:`` sockets are local and not reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.fabric import DriverLookup, FabricBackend, FabricKind, FabricPlan, InvariantSpec, Tenancy
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import Node
from gpufabric.domain.views import ApiHost, CliGroup
from gpufabric.fabrics.dpu import plan, views
from gpufabric.fabrics.dpu.audit import checks
from gpufabric.fabrics.dpu.audit.capacity import parse_capacity
from gpufabric.fabrics.dpu.backend import DpuBackend
from gpufabric.fabrics.dpu.backend.offload import parse_sources, parse_ssh
from gpufabric.fabrics.dpu.drivers.host.mst import MstReader
from gpufabric.fabrics.dpu.drivers.k8s.nodes import SplitK8sDriver
from gpufabric.fabrics.dpu.entries import KIND, MODE_SETTING, Dpu, DpuMode, dump_dpus, parse_dpus
from gpufabric.fabrics.dpu.entries.info import NEEDS, check_remote, node_dpu
from gpufabric.fabrics.dpu.plan import DpuPlan
from gpufabric.fabrics.dpu.plan.profiles import desired_state, offering_role
from gpufabric.fabrics.dpu.site_check import dpu_site_checks
from gpufabric.fabrics.dpu.state import DpuState
from gpufabric.transport.secrets import TLS_FIELDS, TlsFiles, load_tls, remote_methods

if TYPE_CHECKING:
    from gpufabric.domain.hooks import PowerCycled
    from gpufabric.domain.views import FabricAccess

SECTION_KEYS = frozenset({"ovn_nb", "ovsdb", "kubernetes", "kubernetes_dpu", "timeout", "tls", "mst", "drain", "offload", "capacity"})
DRAIN_KEYS = frozenset({"timeout", "retry_every"})


def _drain(raw: Any) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("dpu.drain", raw, "a mapping with keys retry_every, timeout")
    out: dict[str, float] = {}
    for k, v in raw.items():
        if k not in DRAIN_KEYS:
            raise ConfigError(f"dpu.drain.{k}", v, "known keys only: retry_every, timeout")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 3600:
            raise ConfigError(f"dpu.drain.{k}", v, "a number of seconds in (0, 3600]")
        out[str(k)] = float(v)
    return out


def section_tls(section: Mapping[str, Any], remotes: Iterable[str]) -> TlsFiles | None:
    """``dpu.tls``, checked; required when a remote is ``ssl:``, refused when none is."""
    raw = section.get("tls")
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError("dpu.tls", raw, f"a mapping with keys {', '.join(TLS_FIELDS)}")
    for k in raw:
        if k not in TLS_FIELDS:
            raise ConfigError(f"dpu.tls.{k}", raw[k], f"known keys only: {', '.join(TLS_FIELDS)}")
    tls = load_tls("dpu.tls.", *(raw.get(k) for k in TLS_FIELDS))
    ssl = any("ssl" in remote_methods(r) for r in remotes)
    if ssl and tls is None:
        raise ConfigError("dpu.tls", None, "private_key, certificate and ca_cert (a remote of the section is ssl:)")
    if tls is not None and not ssl:
        raise ConfigError("dpu.tls", "given", "only with an ssl: remote (no remote of the section is ssl:)")
    return tls


class DpuKind(FabricKind[DpuState, DpuState]):
    name: ClassVar[str] = KIND
    ports_section = True
    inventory_key: ClassVar[str | None] = "dpus"
    offering_settings: ClassVar[Mapping[str, str]] = {MODE_SETTING: DpuMode.FULL.value}

    # ---- its column of the inventory (the generic port table; entries.py)
    def parse_ports(self, node: str, raw: Any, where: str) -> tuple[Dpu, ...]:
        return parse_dpus(node, raw, where)

    def dump_ports(self, ports: tuple[Any, ...]) -> list[Any]:
        return dump_dpus(ports)

    def build(self, section: Any, drivers: DriverLookup, settings: Mapping[str, Any]) -> FabricBackend[DpuState]:
        if not isinstance(section, Mapping):
            raise ConfigError("dpu", section, f"a mapping with keys {', '.join(sorted(SECTION_KEYS))}")
        for k in section:
            if k not in SECTION_KEYS:
                raise ConfigError(f"dpu.{k}", section[k], f"known keys only: {', '.join(sorted(SECTION_KEYS))}")
        nb = check_remote("dpu.ovn_nb", section.get("ovn_nb", ""), ConfigError)
        remotes = section.get("ovsdb") or {}
        if not isinstance(remotes, Mapping):
            raise ConfigError("dpu.ovsdb", remotes, "a mapping host node -> OVSDB remote")
        ovsdb = {str(h): check_remote(f"dpu.ovsdb.{h}", r, ConfigError) for h, r in remotes.items()}
        timeout = section.get("timeout", 10)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 300:
            raise ConfigError("dpu.timeout", timeout, "a number of seconds in (0, 300]")
        tls = section_tls(section, [nb, *ovsdb.values()])
        ovs_cls, ovn_cls = drivers("dpu-ovsdb"), drivers("ovn-nb")
        k8s_cls: Any = drivers("k8s-nodes")
        k8s = k8s_cls.from_section(section["kubernetes"]) if section.get("kubernetes") is not None else None
        if section.get("kubernetes_dpu") is not None:
            if k8s is None:
                raise ConfigError("dpu.kubernetes_dpu", "given", "only with dpu.kubernetes (the host nodes' cluster)")
            k8s = SplitK8sDriver(k8s, k8s_cls.from_section(section["kubernetes_dpu"], "dpu.kubernetes_dpu"))
        raw_mst = section.get("mst")
        gate_off = isinstance(raw_mst, Mapping) and raw_mst.get("verify", True) is False
        if isinstance(raw_mst, Mapping) and "verify" in raw_mst:
            if not isinstance(raw_mst["verify"], bool) or (gate_off and len(raw_mst) > 1):
                raise ConfigError("dpu.mst.verify", raw_mst["verify"], "true, or false alone (skip the DPU mode gate)")
            raw_mst = {k: v for k, v in raw_mst.items() if k != "verify"}
        mst = MstReader.from_section(raw_mst) if raw_mst and not gate_off else None
        t = float(timeout)
        ovs = {h: ovs_cls(h, r, t, tls=tls if "ssl" in remote_methods(r) else None) for h, r in sorted(ovsdb.items())}
        backend = DpuBackend(
            ovs, ovn_cls(nb, t, tls=tls if "ssl" in remote_methods(nb) else None), k8s,
            mst, _drain(section.get("drain")), gate=not gate_off, checks=dpu_site_checks,
        )
        backend.offload = parse_sources(section.get("offload"))
        backend.offload_ssh = parse_ssh(section.get("offload"), t)
        backend.capacity = parse_capacity(section.get("capacity"))
        return backend

    def desired(self, tenancy: Tenancy) -> DpuState:
        return desired_state(tenancy)

    def diff(self, desired: DpuState, observed: DpuState) -> FabricPlan:
        return plan.diff(desired, observed)

    def as_observed(self, desired: DpuState) -> DpuState:
        return desired

    def empty_state(self) -> DpuState:
        return DpuState()

    def merge(self, observed: DpuState, read_back: DpuState) -> DpuState:
        return plan.merge(observed, read_back)

    def tenants_seen(self, observed: DpuState, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
        return plan.tenants_seen(observed, tenancy)

    def invariants(self) -> tuple[InvariantSpec, ...]:
        return checks.INVARIANTS

    def audit(self, tenancy: Tenancy, desired: DpuState, observed: DpuState) -> Iterable[Violation]:
        return [*checks.audit(tenancy, observed), *checks.flow_leftovers(tenancy, observed.flows)]

    def summary(self, node: Node, tenancy: Tenancy | None = None) -> str:
        """``<dpu> <role>``: the DPU and its OVN-Kubernetes role in the node's offering now
        (``none`` in quarantine; its inventory mode when who holds the node is unknown)."""
        info = node_dpu(node, self.instance)
        if info is None:
            return ""
        return f"{info.name} {info.mode.value if tenancy is None else dpu_role(node, tenancy)}"

    def node_view(self, node: Node, tenancy: Tenancy | None = None) -> Mapping[str, Any]:
        info = node_dpu(node, self.instance)
        if info is None:
            return {"dpus": []}
        role = None if tenancy is None else dpu_role(node, tenancy)
        return {"dpus": [{"name": info.name, "mode": info.mode.value, "role": role, "dpu_node": info.dpu_node,
                          "nic_model": info.nic_model, "pf": info.pf}]}  # fmt: skip

    power_cycle_needs: ClassVar[str | None] = NEEDS

    def power_cycled(self, node: Node, fabrics: FabricAccess) -> PowerCycled | None:
        """Its DPU's mode and firmware, read again (:func:`facts.power_cycled`, imported only then)."""
        from gpufabric.fabrics.dpu.backend.facts import power_cycled

        return power_cycled(self.instance, node, fabrics)

    def cli_group(self) -> CliGroup:
        return views.cli_group()

    def api_router(self, host: ApiHost) -> Any:
        return views.api_router(host)


def dpu_role(node: Node, tenancy: Tenancy) -> str:
    """The host's OVN-Kubernetes role in the offering of its lease (``none`` in quarantine)."""
    return offering_role(tenancy.offering(node.name))


__all__ = ["DpuKind", "DpuPlan", "DpuState"]
