"""The offload report read where the flows live: every configured DPU of ``fabrics.yaml`` (I/O).

Section (``dpu.offload`` in fabrics.yaml), per host node, how to reach its DPU's datapath::

    offload:
      gpu-a01: {appctl: /var/run/openvswitch/ovs-vswitchd.ctl, netns: ""}
      gpu-a02: {appctl: ..., ssh: {host: 192.0.2.22, user: root, key_file: ..., known_hosts: ...}}

``ovs-appctl -t <appctl> dpctl/dump-flows -m`` and ``tc -j -s filter show dev <rep> ingress``
(inside ``netns`` when set) run on this machine, or with ``ssh:`` on the DPU's Arm side over SSH
with host keys checked (:mod:`..drivers.host.sshrun`); the DPU's OVSDB is the ``dpu.ovsdb`` remote. Owners come
from the store (who leases each node now), logical ports from the OVN northbound DB, NIC models
from the inventory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.fabric import Tenancy
from gpufabric.fabrics.dpu.audit.capacity import Capacity, merged
from gpufabric.fabrics.dpu.audit.report import NodeOffload, offload_report
from gpufabric.fabrics.dpu.drivers.host.collect import read_node_offload
from gpufabric.fabrics.dpu.drivers.host.sshrun import SshRunner
from gpufabric.fabrics.dpu.entries.info import dpu_inventory

SOURCE_KEYS = frozenset({"appctl", "netns", "ssh"})


def parse_sources(raw: Any) -> dict[str, dict[str, str]]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("dpu.offload", raw, "a mapping host node -> {appctl, netns}")
    out: dict[str, dict[str, str]] = {}
    for host, src in raw.items():
        if not isinstance(src, Mapping) or not isinstance(src.get("appctl"), str) or not src["appctl"]:
            raise ConfigError(f"dpu.offload.{host}", src, "a mapping with appctl (ovs-vswitchd control socket) and netns")
        for k in src:
            if k not in SOURCE_KEYS:
                raise ConfigError(f"dpu.offload.{host}.{k}", src[k], "known keys only: appctl, netns, ssh")
        out[str(host)] = {"appctl": str(src["appctl"]), "netns": str(src.get("netns") or "")}
    return out


def parse_ssh(raw: Any, timeout: float = 10.0) -> dict[str, SshRunner]:
    """host -> its DPU's SSH runner, for the sources of ``dpu.offload`` with ``ssh:`` (checked by
    :func:`parse_sources` first)."""
    return {str(h): SshRunner.from_section(str(h), src["ssh"], timeout)
            for h, src in (raw or {}).items() if src.get("ssh") is not None}  # fmt: skip


def read_source(backend: Any, host: str, src: Mapping[str, str], model: str = "generic") -> NodeOffload:
    """One DPU's offload state, read here or over its SSH runner."""
    runner = getattr(backend, "offload_ssh", {}).get(host)
    return read_node_offload(host, backend.ovs[host].remote, src["appctl"], src["netns"], model,
                             run=runner.run if runner is not None else None)  # fmt: skip


def site_report(
    backend: Any, tenancy: Tenancy, capacity: Mapping[str, int | Capacity] | None = None, warn_at: float = 0.8
) -> dict[str, Any]:
    """The offload report of every DPU with an offload source (``backend``: a DpuBackend);
    capacities from ``dpu.capacity`` in fabrics.yaml, overridden by ``capacity``."""
    sources: dict[str, dict[str, str]] = getattr(backend, "offload", {})
    if not sources:
        raise ConfigError("dpu.offload", None, "an offload source per DPU host in fabrics.yaml (see docs/dpu.md)")
    inv = dpu_inventory(tenancy.nodes)
    nodes: list[NodeOffload] = []
    for host, src in sorted(sources.items()):
        drv = backend.ovs.get(host)
        if drv is None:
            raise ConfigError(f"dpu.offload.{host}", host, "a host that also has a dpu.ovsdb remote")
        model = inv[host].nic_model if host in inv else "generic"
        nodes.append(read_source(backend, host, src, model))
    lsps = {p.name: p for p in backend.ovn.read()}
    owners = {n.node: tenancy.owner(n.node) for n in nodes}
    owners |= {s.name: tenancy.owner(s.name) for n in nodes for s in tenancy.slots_of(n.node)}
    caps = merged(getattr(backend, "capacity", {}), capacity)
    return offload_report(nodes, lsps, owners, dict(caps), warn_at)
