"""``DpuKind``: the DPU fabric's seam implementation (pure) and its ``fabrics.yaml`` section.

Section format (``dpu:`` in fabrics.yaml)::

    dpu:
      ovn_nb: unix:/run/ovn/ovnnb_db.sock          # OVN northbound remote (required)
      ovsdb:                                       # host node -> its DPU-side OVSDB remote
        gpu-a01: tcp:192.0.2.11:6640
      kubernetes:                                  # optional; absent: labels/taints not managed
        host: https://api.example:6443             # or kubeconfig: /path (in-cluster otherwise)
        kubeconfig: ~/.kube/config
        verify_ssl: true
      timeout: 10                                  # seconds per device command
      mst: {command: [...], device: ...}           # DPU mode/firmware reader (see mst.py); absent: moves
                                                   # into a dpu-host offering are refused; {verify: false}
                                                   # skips the gate explicitly
      drain: {timeout: 120, retry_every: 2}        # drain of nodes leaving OpenShift (seconds)
      offload: {gpu-a01: {appctl: ..., netns: ...}}  # where `offload report` reads each DPU (site.py)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.fabric import DriverLookup, FabricBackend, FabricKind, FabricPlan, InvariantSpec, Tenancy
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import Node
from gpufabric.fabrics.dpu import checks, diff
from gpufabric.fabrics.dpu.backend import DpuBackend
from gpufabric.fabrics.dpu.info import check_remote, node_dpu
from gpufabric.fabrics.dpu.model import DpuPlan, DpuState
from gpufabric.fabrics.dpu.mst import MstReader
from gpufabric.fabrics.dpu.profiles import desired_state
from gpufabric.fabrics.dpu.site import parse_sources

SECTION_KEYS = frozenset({"ovn_nb", "ovsdb", "kubernetes", "timeout", "mst", "drain", "offload"})
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


class DpuKind(FabricKind[DpuState, DpuState]):
    name: ClassVar[str] = "dpu"

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
        ovs_cls, ovn_cls = drivers("dpu-ovsdb"), drivers("ovn-nb")
        k8s_cls: Any = drivers("k8s-nodes")
        k8s = k8s_cls.from_section(section["kubernetes"]) if section.get("kubernetes") is not None else None
        raw_mst = section.get("mst")
        gate_off = isinstance(raw_mst, Mapping) and raw_mst.get("verify", True) is False
        if isinstance(raw_mst, Mapping) and "verify" in raw_mst:
            if not isinstance(raw_mst["verify"], bool) or (gate_off and len(raw_mst) > 1):
                raise ConfigError("dpu.mst.verify", raw_mst["verify"], "true, or false alone (skip the DPU mode gate)")
            raw_mst = {k: v for k, v in raw_mst.items() if k != "verify"}
        mst = MstReader.from_section(raw_mst) if raw_mst and not gate_off else None
        backend = DpuBackend(
            {h: ovs_cls(h, r, float(timeout)) for h, r in sorted(ovsdb.items())}, ovn_cls(nb, float(timeout)), k8s,
            mst, _drain(section.get("drain")), gate=not gate_off,
        )
        backend.offload = parse_sources(section.get("offload"))
        return backend

    def desired(self, tenancy: Tenancy) -> DpuState:
        return desired_state(tenancy)

    def diff(self, desired: DpuState, observed: DpuState) -> FabricPlan:
        return diff.diff(desired, observed)

    def as_observed(self, desired: DpuState) -> DpuState:
        return desired

    def empty_state(self) -> DpuState:
        return DpuState()

    def merge(self, observed: DpuState, read_back: DpuState) -> DpuState:
        return diff.merge(observed, read_back)

    def tenants_seen(self, observed: DpuState, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
        return diff.tenants_seen(observed, tenancy)

    def invariants(self) -> tuple[InvariantSpec, ...]:
        return checks.INVARIANTS

    def audit(self, tenancy: Tenancy, desired: DpuState, observed: DpuState) -> Iterable[Violation]:
        return list(checks.audit(tenancy, observed))

    def summary(self, node: Node) -> str:
        info = node_dpu(node)
        return "" if info is None else f"{info.name} ({info.nic_model}) -> {info.dpu_node}"


__all__ = ["DpuKind", "DpuPlan", "DpuState"]
