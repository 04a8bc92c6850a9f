"""The ``fmpm`` backend: drives each node's Fabric Manager through NVIDIA's Fabric-Manager-Client
command line (``fmpm``), one subprocess per call.

Fabric Manager cannot run on this machine (it needs NVSwitch hardware): this driver is written
against fmpm's documented interface and output (fmpm.cpp of NVIDIA/Fabric-Manager-Client) and
tested with recorded outputs and the lab's stand-in ``gpufabric.lab.fmpm_standin``. It implements
the contract of :mod:`..base` (observe, apply with verified read-back, replay, failed devices,
domains).

* One FM per node: ``fm`` maps node -> address, ``unix:/path`` (``--unix-domain-socket``) or
  ``tcp:host`` / ``host`` (``--hostname``; FM's API port is its FM_CMD_PORT_NUMBER, default
  6666 - fmpm has no port flag, so only 6666 is accepted). FM's API has neither encryption nor
  authentication: a host other than loopback is reported by :meth:`FmpmDriver.transport_notes`
  (audit ``TRANSPORT-INSECURE``).
* ``apply`` runs every deactivation (all nodes, in parallel across nodes) before any
  activation, then re-reads ``fmpm -l`` of the touched nodes and returns that verified
  read-back. Idempotent: -7 on activating an already-active partition and -4 on deactivating
  an inactive one count as success when the re-read shows the desired state.
* ``replay(node)`` re-sends the last verified active set with ``--set-activated-list`` after an
  FM restart (resiliency mode); ``failed_devices(node)`` reports NVLink-failed GPUs/switches,
  which also mark GPUs unhealthy in ``observe``. ``smi`` (optional) maps node -> a command
  printing that node's ``nvidia-smi -q`` (e.g. over ssh) for the GPUs' Fabric State/Status;
  ``domains()`` reads each node's NVLink domain (ClusterUUID/CliqueId) through the same
  commands, and ``domains_text()`` prints them for ``inventory import --format nvidia-smi``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, ClassVar, TypeVar

from gpufabric.domain.errors import ConfigError, FabricError, VerifyError
from gpufabric.domain.fabric import FabricPlan
from gpufabric.domain.site_check import SiteCheck, SiteContext
from gpufabric.fabrics.nvlink.drivers.base import DOMAINS, FAILED_DEVICES, REPLAY, FmCallError, NvlinkDriver
from gpufabric.fabrics.nvlink.drivers.fmpm.site_check import nvlink_site_checks
from gpufabric.fabrics.nvlink.entries import NvlinkDomain
from gpufabric.fabrics.nvlink.plan import NvlinkPlan, PartitionChange
from gpufabric.fabrics.nvlink.readers.fmpm import (
    FailedDevice,
    norm_bus,
    parse_failed_devices,
    parse_failure,
    parse_partition_list,
    parse_unsupported,
)
from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.fabrics.nvlink.readers.smi import parse_smi_q, pdsh_text, smi_domain
from gpufabric.fabrics.nvlink.state import FABRIC, NodeFm, NvlinkState
from gpufabric.transport.secrets import TransportNote, is_loopback_host

T = TypeVar("T")
FM_PORT = 6666


class FmpmError(FmCallError):
    """An fmpm call failed: ``fm_code`` is FM's return code (e.g. -7 in use)."""

    code = "fmpm"


def address_args(node: str, address: str) -> list[str]:
    """fmpm's connection flags for an FM address (ConfigError naming the node's entry)."""
    where = f"nvlink.options.fm.{node}"
    if not isinstance(address, str) or not address.strip():
        raise ConfigError(where, address, "unix:/path/to/socket, tcp:host or host")
    text = address.strip()
    if text.startswith("unix:"):
        path = text.removeprefix("unix:")
        if not path:
            raise ConfigError(where, address, "unix:/path/to/socket")
        return ["--unix-domain-socket", path]
    host = text.removeprefix("tcp:")
    if host.count(":") == 1:
        host, port = host.split(":")
        if port != str(FM_PORT):
            raise ConfigError(where, address, f"port {FM_PORT} (fmpm has no port option)")
    if not host:
        raise ConfigError(where, address, "unix:/path/to/socket, tcp:host or host")
    return ["--hostname", host]


def _command(where: str, raw: str | Sequence[str]) -> list[str]:
    cmd = shlex.split(raw) if isinstance(raw, str) else [str(x) for x in raw]
    if not cmd:
        raise ConfigError(where, raw, "a command (string or list)")
    return cmd


class FmpmDriver(NvlinkDriver):
    """NVLink partitions of every node through its Fabric Manager, with ``fmpm``."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"observe", "apply", REPLAY, FAILED_DEVICES, DOMAINS})
    kind: ClassVar[str] = "nvlink"

    def __init__(
        self,
        fm: Mapping[str, str],
        fmpm: str | Sequence[str] = "fmpm",
        timeout: float = 10.0,
        smi: Mapping[str, str | Sequence[str]] | None = None,
        env: Mapping[str, str] | None = None,
        workers: int = 8,
    ) -> None:
        if not isinstance(fm, Mapping) or not fm:
            raise ConfigError("nvlink.options.fm", fm, "a mapping node -> FM address (unix:/path or tcp:host)")
        self.fm = {str(n): address_args(str(n), a) for n, a in fm.items()}
        self.fmpm = _command("nvlink.options.fmpm", fmpm)
        self.smi = {str(n): _command(f"nvlink.options.smi.{n}", c) for n, c in (smi or {}).items()}
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError("nvlink.options.timeout", timeout, "a positive number of seconds")
        self.timeout = float(timeout)
        self.env = {**os.environ, **{str(k): str(v) for k, v in (env or {}).items()}}
        self.workers = max(1, int(workers))
        self._verified: dict[str, frozenset[int]] = {}
        self._health: dict[str, NodeFm] = {}  # the last full read of each node (its GPUs' health)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(self.fm))

    @property
    def domain_nodes(self) -> tuple[str, ...]:
        """The nodes with an ``smi`` command."""
        return tuple(sorted(self.smi))

    def site_checks(self, context: SiteContext) -> Sequence[SiteCheck]:
        return nvlink_site_checks(self, context)

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """FM reached over TCP on another host (plain, unauthenticated), for the audit."""
        return tuple(
            TransportNote(node, "fm", f"Fabric Manager of {node} at {a[1]}:{FM_PORT} over plain TCP: "
                          "FM's API is unencrypted and unauthenticated")
            for node, a in sorted(self.fm.items()) if a[0] == "--hostname" and not is_loopback_host(a[1])
        )  # fmt: skip

    # ---- running fmpm
    def _run(self, node: str, *args: str) -> str:
        if node not in self.fm:
            raise ConfigError("nvlink.options.fm", node, f"an FM address for node {node} ({', '.join(sorted(self.fm))})")
        cmd = [*self.fmpm, *self.fm[node], *args]
        shown = " ".join(shlex.quote(c) for c in cmd)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout, env=self.env, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            code = FmReturn.TIMEOUT if isinstance(e, subprocess.TimeoutExpired) else FmReturn.CONNECTION_NOT_VALID
            raise FmpmError(f"{node}: {shown}: {e}", node=node, fm_code=int(code), command=shown) from None
        if p.returncode != 0:
            f = parse_failure(p.stdout + p.stderr, p.returncode)
            raise FmpmError(f"{node}: {shown}: {f.describe()}", node=node, fm_code=f.code, command=shown)
        return p.stdout

    def _parallel(self, nodes: Iterable[str], fn: Callable[[str], T]) -> dict[str, T]:
        names = sorted(set(nodes))
        if len(names) <= 1:
            return {n: fn(n) for n in names}
        with ThreadPoolExecutor(max_workers=min(self.workers, len(names))) as pool:
            futures = {n: pool.submit(fn, n) for n in names}
            return {n: f.result() for n, f in futures.items()}

    # ---- reading
    def failed_devices(self, node: str) -> tuple[FailedDevice, ...]:
        """The NVLink-failed GPUs and NVSwitches FM reports for ``node`` (empty if FM does not
        support the query)."""
        try:
            return parse_failed_devices(self._run(node, "--get-nvlink-failed-devices"))
        except FmpmError as e:
            if e.fm_code == FmReturn.NOT_SUPPORTED:
                return ()
            raise

    def read_node(self, node: str, *, health: bool = True) -> NodeFm:
        """``fmpm -l`` of ``node`` (and, with ``health``, unsupported partitions, failed
        NVLink devices and the optional ``nvidia-smi -q``)."""
        fm = parse_partition_list(self._run(node, "-l"), node)
        if not health:
            return fm
        try:
            unsupported = frozenset(p.id for p in parse_unsupported(self._run(node, "--list-unsupported-partitions")))
        except FmpmError as e:
            if e.fm_code != FmReturn.NOT_SUPPORTED:
                raise
            unsupported = frozenset()
        failed = {norm_bus(d.pci_bus_id): d.ports for d in self.failed_devices(node) if d.kind == "gpu"}
        smi: dict[int, tuple[str, str]] = {}
        if node in self.smi:
            out = self._smi(node)
            smi = {g.module_id: (g.state, g.status) for g in parse_smi_q(out) if g.module_id is not None}
        gpus = tuple(
            replace(
                g,
                failed_ports=failed.get(norm_bus(g.pci_bus_id), ()),
                state=smi.get(g.module_id, ("", ""))[0],
                status=smi.get(g.module_id, ("", ""))[1],
            )
            for g in fm.gpus
        )
        full = NodeFm(node, fm.partitions, fm.active, gpus, unsupported)
        self._health[node] = full
        return full

    def _read_back(self, node: str) -> NodeFm:
        """``fmpm -l`` of ``node`` with the GPU health of its last full read (one call)."""
        fm = self.read_node(node, health=False)
        last = self._health.get(node)
        if last is None:
            return fm
        gpus = tuple(
            replace(g, failed_ports=o.failed_ports, state=o.state, status=o.status) if (o := last.gpu(g.module_id)) else g
            for g in fm.gpus
        )
        return NodeFm(node, fm.partitions, fm.active, gpus, last.unsupported)

    def _smi(self, node: str) -> str:
        cmd = self.smi[node]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout, env=self.env, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise FabricError(f"{node}: nvidia-smi -q: {e}", fabric=FABRIC, device=node) from None
        if p.returncode != 0:
            raise FabricError(f"{node}: nvidia-smi -q exited {p.returncode}: {p.stderr.strip()}", fabric=FABRIC, device=node)
        return p.stdout

    def smi_outputs(self) -> dict[str, str]:
        """Each node's ``nvidia-smi -q`` through its ``smi`` command, in parallel (nodes without one left out)."""
        return self._parallel(self.smi, self._smi)

    def domains(self) -> dict[str, NvlinkDomain]:
        """Each node's NVLink domain as its GPUs' Fabric sections report it now (the nodes with an ``smi`` command)."""
        return {n: smi_domain(n, out) for n, out in self.smi_outputs().items()}

    def domains_text(self) -> str:
        """Every node's ``nvidia-smi -q`` as pdsh prints it (``node: line``): the text
        ``inventory import --format nvidia-smi`` records the domains from (each checked first)."""
        outputs = self.smi_outputs()
        for n, out in outputs.items():
            smi_domain(n, out)
        return pdsh_text(sorted(outputs.items()))

    def observe(self) -> NvlinkState:
        nodes = self._parallel(self.fm, self.read_node)
        for n, fm in nodes.items():
            self._verified[n] = fm.active
        return NvlinkState(nodes)

    # ---- changing
    def _change(self, c: PartitionChange) -> PartitionChange | None:
        """Run one change; return it when FM refused it with the idempotent code (-7/-4)."""
        try:
            self._run(c.node, "-a" if c.activate else "-d", str(c.partition))
        except FmpmError as e:
            tolerated = FmReturn.IN_USE if c.activate else FmReturn.UNINITIALIZED
            if e.fm_code == tolerated:
                return c
            raise
        return None

    def _changes(self, changes: Sequence[PartitionChange]) -> list[PartitionChange]:
        by_node: dict[str, list[PartitionChange]] = {}
        for c in changes:
            by_node.setdefault(c.node, []).append(c)
        done = self._parallel(by_node, lambda n: [t for c in by_node[n] if (t := self._change(c)) is not None])
        return [c for cs in done.values() for c in cs]

    def apply(self, plan: FabricPlan) -> NvlinkState:
        if not isinstance(plan, NvlinkPlan):
            raise ConfigError("nvlink.plan", type(plan).__name__, "an NvlinkPlan")
        for n in plan.nodes():
            if n not in self.fm:
                raise ConfigError("nvlink.options.fm", n, f"an FM address for every node the plan touches ({n})")
        removals, additions = plan.split()
        tolerated = self._changes(removals.changes)
        tolerated += self._changes(additions.changes)
        back = self._parallel(plan.nodes(), self._read_back)
        for c in plan.changes:
            if (c.partition in back[c.node].active) != c.activate:
                want = "active" if c.activate else "inactive"
                if c in tolerated:
                    r = FmReturn.IN_USE if c.activate else FmReturn.UNINITIALIZED
                    raise FmpmError(
                        f"{c.node}: partition {c.partition} is not {want}: FM answered {int(r)} ({r.label})",
                        node=c.node,
                        fm_code=int(r),
                        command=c.line(),
                    )
                raise VerifyError(f"{c.node}: partition {c.partition} read back not {want}", fabric=FABRIC, device=c.node)
        for n, fm in back.items():
            self._verified[n] = fm.active
        return NvlinkState(back)

    def replay(self, node: str, partitions: Iterable[int] | None = None) -> NodeFm:
        """Tell a restarted FM which partitions are active (``--set-activated-list``): the
        given ids, or the last set this backend verified for ``node``; returns the read-back."""
        ids = sorted(set(self._verified.get(node, frozenset()) if partitions is None else partitions))
        if ids:
            self._run(node, "--set-activated-list", ",".join(map(str, ids)))
        fm = self._read_back(node)
        if fm.active != frozenset(ids):
            raise VerifyError(f"{node}: active partitions {sorted(fm.active)} after replaying {ids}", fabric=FABRIC, device=node)
        self._verified[node] = fm.active
        return fm

    def describe(self) -> dict[str, Any]:
        return {"driver": "fmpm", "fmpm": self.fmpm, "nodes": sorted(self.fm)}
