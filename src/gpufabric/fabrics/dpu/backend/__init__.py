"""``DpuBackend``: the DPU fabric's I/O in one deployment, made of three drivers — the
DPU-side OVS of each host (:mod:`.drivers.host.ovs`), the OVN northbound DB (:mod:`.drivers.ovn`) and, when configured,
the Kubernetes API (:mod:`.drivers.k8s`). ``apply`` returns the verified read-back of the objects it
touched (``DpuState.covered``). :meth:`DpuBackend.transport_notes` gathers what each driver
reports about its own transport (``tcp:`` remotes, Kubernetes without TLS verification or over
http to another host) for the audit's ``TRANSPORT-INSECURE``. ``before_move``/``after_join``: the
DPU gates and the OpenShift node lifecycle (:mod:`.lifecycle`). ``site_checks``: the kind's own
(:mod:`gpufabric.fabrics.dpu.site_check`), given by :meth:`DpuKind.build` (it sits above the backend)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.fabric import FabricBackend, FabricPlan, Tenancy
from gpufabric.domain.moves import Move
from gpufabric.domain.site_check import SiteCheck, SiteContext
from gpufabric.fabrics.dpu.audit.capacity import Capacity
from gpufabric.fabrics.dpu.backend import lifecycle
from gpufabric.fabrics.dpu.drivers.base import HostOvsDriver, NodeLabelDriver, OvnDriver
from gpufabric.fabrics.dpu.drivers.k8s.drain import Drainer
from gpufabric.fabrics.dpu.plan import DpuPlan
from gpufabric.fabrics.dpu.state import DpuState, Item, Label, LogicalPort, OvsSetting, Taint
from gpufabric.transport.secrets import TransportNote


class DpuBackend(FabricBackend[DpuState]):
    kind = "dpu"

    def __init__(
        self, ovs: Mapping[str, HostOvsDriver], ovn: OvnDriver, k8s: NodeLabelDriver | None, mst: Any | None = None,
        drain: Mapping[str, float] | None = None, gate: bool = True,
        checks: Callable[[Any, SiteContext], Sequence[SiteCheck]] | None = None,
    ) -> None:  # fmt: skip
        self.ovs, self.ovn, self.k8s, self.mst, self.gate = dict(ovs), ovn, k8s, mst, gate
        self.checks = checks  # the kind's site checks of this backend (site_check.py)
        self.offload: dict[str, dict[str, str]] = {}  # host -> offload source (backend/offload.py)
        self.offload_ssh: dict[str, Any] = {}  # host -> SshRunner of its DPU's Arm side (drivers/host/sshrun.py)
        self.capacity: dict[str, Capacity] = {}  # NIC model -> offload-table size with its source
        api = getattr(k8s, "api", None)
        d = dict(drain or {})
        self.drainer = (
            Drainer(api, timeout=d.get("timeout", 120.0), retry_every=d.get("retry_every", 2.0))
            if api is not None else None
        )  # fmt: skip

    def before_move(self, tenancy: Tenancy, moves: Sequence[Move]) -> None:
        lifecycle.check_gates(tenancy, moves, self.mst, self.gate)
        lifecycle.drain_leaving(tenancy, moves, self.drainer)

    def after_join(self, tenancy: Tenancy, moves: Sequence[Move]) -> None:
        lifecycle.join(tenancy, moves, self.drainer)

    def site_checks(self, context: SiteContext) -> Sequence[SiteCheck]:
        return () if self.checks is None else self.checks(self, context)

    def transport_notes(self) -> tuple[TransportNote, ...]:
        notes: list[TransportNote] = []
        for drv in [*self.ovs.values(), self.ovn, self.k8s, *self.offload_ssh.values()]:
            fn = getattr(drv, "transport_notes", None)
            notes += fn() if callable(fn) else ()
        return tuple(notes)

    def close(self) -> None:
        for runner in self.offload_ssh.values():
            runner.close()

    def observe(self) -> DpuState:
        """The whole fabric, with the datapath flows of every DPU with an offload source (only the
        audit's flow leftovers need those: a move reads :meth:`observe_for_moves`)."""
        items = self._items()
        return replace(DpuState.of(items), flows=self._flow_tenants(items))

    def observe_for_moves(self) -> DpuState:
        """The fabric without the datapath flows (no ``dpctl/dump-flows`` / ``tc`` on any DPU)."""
        return DpuState.of(self._items())

    def _items(self) -> list[Item]:
        items: list[Item] = []
        for drv in self.ovs.values():
            items += drv.read()
        items += self.ovn.read()
        if self.k8s is not None:
            labels, taints = self.k8s.read()
            items += [*labels, *taints]
        return items

    def _flow_tenants(self, items: Sequence[Item]) -> frozenset[tuple[str, str]]:
        """(node, tenant) of every datapath flow the offload report attributes to a tenant, on
        the DPUs with an offload source (the audit's flow leftovers); node: the DPU's host, or the
        slot whose logical port the flow is."""
        from gpufabric.fabrics.dpu.audit.report import UNATTRIBUTED, flow_unit
        from gpufabric.fabrics.dpu.backend.offload import read_source

        lsps = {p.name: p for p in items if isinstance(p, LogicalPort)}
        pairs: set[tuple[str, str]] = set()
        for host, src in sorted(self.offload.items()):
            if host not in self.ovs:
                continue
            node = read_source(self, host, src)
            pairs |= {u for f in node.flows if (u := flow_unit(f, node, lsps))[1] != UNATTRIBUTED}
        return frozenset(pairs)

    def metrics(self, tenancy: Tenancy) -> str:
        """The offload report's series (audit/report.py) of every DPU with an offload source."""
        if not self.offload:
            return ""
        from gpufabric.fabrics.dpu.audit.report import metrics_text
        from gpufabric.fabrics.dpu.backend.offload import site_report

        return metrics_text(site_report(self, tenancy))

    def apply(self, plan: FabricPlan) -> DpuState:
        if not isinstance(plan, DpuPlan):
            raise TypeError(f"DpuBackend.apply takes a DpuPlan, not {type(plan).__name__}")
        removed, added = plan.removed(), plan.added()
        hosts = sorted({i.node for i in [*removed, *added] if isinstance(i, OvsSetting)})
        k_rm = [i for i in removed if isinstance(i, (Label, Taint))]
        k_add = [i for i in added if isinstance(i, (Label, Taint))]
        for h in hosts:  # configuration checked before any I/O
            if h not in self.ovs:
                raise ConfigError(f"dpu.ovsdb.{h}", None, "an OVSDB remote for every host with a DPU")
        if (k_rm or k_add) and self.k8s is None:
            raise ConfigError("dpu.kubernetes", None, "a Kubernetes API section (the plan changes node labels/taints)")
        items: list[Item] = []
        # data plane first: a removal plan cuts the old tenant's logical ports before anything else
        p_rm = [i for i in removed if isinstance(i, LogicalPort)]
        p_add = [i for i in added if isinstance(i, LogicalPort)]
        if p_rm or p_add:
            items += self.ovn.apply(p_rm, p_add)
        for h in hosts:
            items += self.ovs[h].apply(
                [i for i in removed if isinstance(i, OvsSetting) and i.node == h],
                [i for i in added if isinstance(i, OvsSetting) and i.node == h],
            )
        if (k_rm or k_add) and self.k8s is not None:
            labels, taints = self.k8s.apply(k_rm, k_add)
            items += [*labels, *taints]
        return DpuState.of(items, plan.objects())
