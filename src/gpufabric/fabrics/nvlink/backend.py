"""The NVLink backend: a driver's Fabric Manager calls (``drivers/base.py``) -> observe, apply with
verified read-back, replay; the registered ``fmpm`` driver (:class:`FmpmDriver`, this backend
over ``drivers/fmpm/``), its site check, and the backend a fabrics.yaml section names.

* ``observe`` reads every node in parallel across nodes: its partitions and active set, the
  partitions FM cannot activate, NVLink-failed GPUs and, for nodes with ``nvidia-smi -q``, the
  GPUs' fabric State/Status (each as far as the driver's capabilities go).
* ``apply`` runs every deactivation (all nodes, in parallel across nodes) before any
  activation, then re-reads the touched nodes and returns that verified read-back.
  Idempotent: -7 on activating an already-active partition and -4 on deactivating an inactive
  one count as success when the re-read shows the desired state.
* ``replay(node)`` re-sends the last verified active set after an FM restart (resiliency mode);
  ``failed_devices(node)`` reports NVLink-failed GPUs/switches, which also mark GPUs unhealthy
  in ``observe``; ``domains()`` reads each node's NVLink domain (ClusterUUID/CliqueId) from its
  ``nvidia-smi -q``, and ``domains_text()`` prints them for ``inventory import --format nvidia-smi``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, ClassVar, TypeVar

from gpufabric.domain.errors import ConfigError, VerifyError
from gpufabric.domain.fabric import DriverLookup, FabricBackend, FabricPlan
from gpufabric.domain.site_check import CheckLevel, SiteCheck, SiteContext, device_check, transport_checks
from gpufabric.fabrics.nvlink.drivers.base import DOMAINS, FAILED_DEVICES, REPLAY, UNSUPPORTED, FmCallError, FmDriver
from gpufabric.fabrics.nvlink.drivers.fmpm.driver import Fmpm, FmpmConfig
from gpufabric.fabrics.nvlink.entries import NvlinkDomain, node_gpus
from gpufabric.fabrics.nvlink.plan import NvlinkPlan, PartitionChange
from gpufabric.fabrics.nvlink.readers.fmpm import FailedDevice, norm_bus
from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.fabrics.nvlink.readers.smi import parse_smi_q, pdsh_text, smi_domain
from gpufabric.fabrics.nvlink.state import FABRIC, NodeFm, NvlinkState
from gpufabric.transport.secrets import TransportNote

T = TypeVar("T")


class FmBackend(FabricBackend[NvlinkState]):
    """NVLink partitions of every node through its Fabric Manager, with one driver."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"observe", "apply", REPLAY, FAILED_DEVICES, DOMAINS})
    kind: ClassVar[str] = "nvlink"

    def __init__(self, driver: FmDriver, workers: int = 8) -> None:
        self.driver = driver
        self.workers = max(1, int(workers))
        self._verified: dict[str, frozenset[int]] = {}
        self._health: dict[str, NodeFm] = {}  # the last full read of each node (its GPUs' health)

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.driver.nodes

    @property
    def domain_nodes(self) -> tuple[str, ...]:
        """The nodes whose NVLink domain :meth:`domains` reads (those with ``nvidia-smi -q``)."""
        return self.driver.smi_nodes if DOMAINS in self.driver.capabilities else ()

    def site_checks(self, context: SiteContext) -> Sequence[SiteCheck]:
        return nvlink_site_checks(self, context)

    def transport_notes(self) -> tuple[TransportNote, ...]:
        return self.driver.transport_notes()

    def _parallel(self, nodes: Iterable[str], fn: Callable[[str], T]) -> dict[str, T]:
        names = sorted(set(nodes))
        if len(names) <= 1:
            return {n: fn(n) for n in names}
        with ThreadPoolExecutor(max_workers=min(self.workers, len(names))) as pool:
            futures = {n: pool.submit(fn, n) for n in names}
            return {n: f.result() for n, f in futures.items()}

    # ---- reading
    def failed_devices(self, node: str) -> tuple[FailedDevice, ...]:
        """The NVLink-failed GPUs and NVSwitches FM reports for ``node`` (empty if FM or the
        driver does not support the query)."""
        if FAILED_DEVICES not in self.driver.capabilities:
            return ()
        try:
            return self.driver.failed_devices(node)
        except FmCallError as e:
            if e.fm_code == FmReturn.NOT_SUPPORTED:
                return ()
            raise

    def read_node(self, node: str, *, health: bool = True) -> NodeFm:
        """The partitions of ``node`` (and, with ``health``, unsupported partitions, failed
        NVLink devices and the optional ``nvidia-smi -q``)."""
        fm = self.driver.list_partitions(node)
        if not health:
            return fm
        unsupported: frozenset[int] = frozenset()
        if UNSUPPORTED in self.driver.capabilities:
            try:
                unsupported = self.driver.unsupported(node)
            except FmCallError as e:
                if e.fm_code != FmReturn.NOT_SUPPORTED:
                    raise
        failed = {norm_bus(d.pci_bus_id): d.ports for d in self.failed_devices(node) if d.kind == "gpu"}
        smi: dict[int, tuple[str, str]] = {}
        if node in self.domain_nodes:
            out = self.driver.smi_q(node)
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
        """The partitions of ``node`` with the GPU health of its last full read (one call)."""
        fm = self.read_node(node, health=False)
        last = self._health.get(node)
        if last is None:
            return fm
        gpus = tuple(
            replace(g, failed_ports=o.failed_ports, state=o.state, status=o.status)
            if (o := last.gpu(g.module_id))
            else g
            for g in fm.gpus
        )
        return NodeFm(node, fm.partitions, fm.active, gpus, last.unsupported)

    def smi_outputs(self) -> dict[str, str]:
        """Each node's ``nvidia-smi -q``, in parallel (nodes without one left out)."""
        return self._parallel(self.domain_nodes, self.driver.smi_q)

    def domains(self) -> dict[str, NvlinkDomain]:
        """Each node's NVLink domain as its GPUs' Fabric sections report it now (the nodes with ``nvidia-smi -q``)."""
        return {n: smi_domain(n, out) for n, out in self.smi_outputs().items()}

    def domains_text(self) -> str:
        """Every node's ``nvidia-smi -q`` as pdsh prints it (``node: line``): the text
        ``inventory import --format nvidia-smi`` records the domains from (each checked first)."""
        outputs = self.smi_outputs()
        for n, out in outputs.items():
            smi_domain(n, out)
        return pdsh_text(sorted(outputs.items()))

    def observe(self) -> NvlinkState:
        nodes = self._parallel(self.nodes, self.read_node)
        for n, fm in nodes.items():
            self._verified[n] = fm.active
        return NvlinkState(nodes)

    # ---- changing
    def _change(self, c: PartitionChange) -> tuple[PartitionChange, FmCallError] | None:
        """Run one change; return it and FM's answer when FM refused it with the idempotent code (-7/-4)."""
        try:
            (self.driver.activate if c.activate else self.driver.deactivate)(c.node, c.partition)
        except FmCallError as e:
            tolerated = FmReturn.IN_USE if c.activate else FmReturn.UNINITIALIZED
            if e.fm_code == tolerated:
                return c, e
            raise
        return None

    def _changes(self, changes: Sequence[PartitionChange]) -> list[tuple[PartitionChange, FmCallError]]:
        by_node: dict[str, list[PartitionChange]] = {}
        for c in changes:
            by_node.setdefault(c.node, []).append(c)
        done = self._parallel(by_node, lambda n: [t for c in by_node[n] if (t := self._change(c)) is not None])
        return [t for ts in done.values() for t in ts]

    def apply(self, plan: FabricPlan) -> NvlinkState:
        if not isinstance(plan, NvlinkPlan):
            raise ConfigError("nvlink.plan", type(plan).__name__, "an NvlinkPlan")
        for n in plan.nodes():
            if n not in self.nodes:
                raise ConfigError("nvlink.options.fm", n, f"an FM address for every node the plan touches ({n})")
        removals, additions = plan.split()
        tolerated = dict(self._changes(removals.changes))
        tolerated.update(self._changes(additions.changes))
        back = self._parallel(plan.nodes(), self._read_back)
        for c in plan.changes:
            if (c.partition in back[c.node].active) != c.activate:
                want = "active" if c.activate else "inactive"
                if (e := tolerated.get(c)) is not None:
                    r = FmReturn.IN_USE if c.activate else FmReturn.UNINITIALIZED
                    raise type(e)(
                        f"{c.node}: partition {c.partition} is not {want}: FM answered {int(r)} ({r.label})",
                        node=c.node,
                        fm_code=int(r),
                        command=c.line(),
                    )
                raise VerifyError(
                    f"{c.node}: partition {c.partition} read back not {want}", fabric=FABRIC, device=c.node
                )
        for n, fm in back.items():
            self._verified[n] = fm.active
        return NvlinkState(back)

    def replay(self, node: str, partitions: Iterable[int] | None = None) -> NodeFm:
        """Tell a restarted FM which partitions are active: the given ids, or the last set
        this backend verified for ``node``; returns the read-back."""
        ids = sorted(set(self._verified.get(node, frozenset()) if partitions is None else partitions))
        if ids:
            self.driver.set_activated(node, ids)
        fm = self._read_back(node)
        if fm.active != frozenset(ids):
            raise VerifyError(
                f"{node}: active partitions {sorted(fm.active)} after replaying {ids}", fabric=FABRIC, device=node
            )
        self._verified[node] = fm.active
        return fm

    def describe(self) -> dict[str, Any]:
        return self.driver.describe()


class FmpmDriver(FmBackend):
    """The registered ``fmpm`` driver (``gpufabric.drivers``): this backend over :class:`Fmpm`,
    built from fabrics.yaml's ``nvlink.options``: :class:`FmpmConfig`'s fields (``fm``, ``fmpm``,
    ``timeout``, ``smi``, ``env``) and the backend's ``workers``."""

    def __init__(self, config: FmpmConfig | None = None, *, workers: int = 8, **options: Any) -> None:
        self.fmpm = Fmpm(config, **options)
        super().__init__(self.fmpm, workers)

    @property
    def fm(self) -> dict[str, list[str]]:
        """Each node's fmpm connection flags."""
        return self.fmpm.fm


def nvlink_site_checks(backend: FmBackend, ctx: SiteContext) -> list[SiteCheck]:
    """``gpufabric site check`` for NVLink: every node's Fabric Manager answers (its partitions
    and GPUs read), and every inventory node with GPUs has an ``nvlink.options.fm`` entry (a
    node without one could never be isolated on NVLink)."""

    def one(node: str) -> SiteCheck:
        return device_check("NVLINK-REACH", node, lambda: backend.read_node(node),
                            f"Fabric Manager of {node} (fabrics.yaml nvlink.options.fm.{node})")  # fmt: skip

    out: list[SiteCheck] = list(backend._parallel(backend.nodes, one).values())
    out += transport_checks("NVLINK-TRANSPORT", "fabrics.yaml nvlink", backend)
    for n in ctx.nodes:
        if (gpus := node_gpus(n)) and n.name not in backend.nodes:
            out.append(SiteCheck("NVLINK-INVENTORY", CheckLevel.ERROR, f"inventory node {n.name} has {len(gpus)} "
                                 f"GPU(s) but no fabrics.yaml nvlink.options.fm.{n.name} entry", n.name))  # fmt: skip
    return out


def build_backend(section: Any, drivers: DriverLookup) -> FabricBackend[NvlinkState]:
    """The backend of ``section`` (``{"driver": NAME, "options": {...}}``, the driver looked up
    among the registered ones): ``nvlink``, ``nvlink.driver`` or ``nvlink.options`` named when it
    is not a mapping with a driver, names no backend, or has options the driver refuses."""
    if not isinstance(section, Mapping) or "driver" not in section:
        raise ConfigError("nvlink", section, "a mapping with 'driver' and 'options'")
    cls = drivers(str(section["driver"]))
    if not (isinstance(cls, type) and issubclass(cls, FabricBackend)):
        raise ConfigError("nvlink.driver", section["driver"], "an NVLink backend driver (e.g. fmpm)")
    options = section.get("options") or {}
    if not isinstance(options, Mapping):
        raise ConfigError("nvlink.options", options, "a mapping of driver options")
    try:
        backend: FabricBackend[NvlinkState] = cls(**options)
    except TypeError as e:
        raise ConfigError(
            "nvlink.options", dict(options), f"the options of driver {section['driver']}", str(e)
        ) from None
    return backend
