"""The InfiniBand kind's backend: one subnet-manager driver (the subnet's partition authority)
behind the seam's observe / apply (the driver's SMP read-back of the ports it changed) /
contain (rogue SMs, cut off by a driver that declares :data:`~.drivers.base.CONTAIN`) / watch
(:data:`~.drivers.base.WATCH`), and the site checks the kind hands in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpufabric.domain.fabric import Containment, FabricBackend, FabricPlan, Tenancy
from gpufabric.domain.site_check import SiteCheck, SiteContext
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.audit.places import Places
from gpufabric.fabrics.infiniband.audit.rogue import RoguePolicy, find_rogue_sms
from gpufabric.fabrics.infiniband.drivers.base import CONTAIN, WATCH, SmWatcher, SubnetManagerDriver, capabilities_of
from gpufabric.fabrics.infiniband.plan import DEFAULT_INSTANCE, IbPlan, instance_ports, reachable
from gpufabric.fabrics.infiniband.segments import PKeyMapping
from gpufabric.fabrics.infiniband.segments.pools import pool_field
from gpufabric.fabrics.infiniband.state import IbFabricState
from gpufabric.transport.secrets import TransportNote

SiteChecks = Callable[..., Sequence[SiteCheck]]
"""``(sm, trusted, context, [pool field, pool,] instance=...)``: the kind's site checks of one subnet."""


class InfinibandBackend(FabricBackend[IbFabricState]):
    """One subnet manager driver (the subnet's partition authority)."""

    capabilities = frozenset({"observe", "apply", "contain", "settings", "watch"})

    def __init__(
        self,
        sm: SubnetManagerDriver,
        trusted_sm_guids: tuple[Guid, ...] = (),
        instance: str = DEFAULT_INSTANCE,
        pool: PKeyMapping | None = None,
        checks: SiteChecks | None = None,
    ) -> None:
        self.sm = sm
        self.trusted_sm_guids = trusted_sm_guids
        self.instance = instance  # the subnet this SM drives: only its HCA ports are its to place and cut
        self.pool = pool  # the subnet's own segment pool (None: config.yaml's, shared)
        self._watch: SmWatcher | None = None
        self.checks = checks  # the kind's site checks (:mod:`.site_check`, above this layer), handed in

    def watch(self) -> tuple[str, ...]:
        """One cheap rogue-SM watch pass (the driver's :data:`~.drivers.base.WATCH`): what looks
        like a rogue SM now, one line each; the caller runs the full detection/containment when
        it is not empty. Only a driver with the capability is watched (UFM runs its own SM)."""
        if WATCH not in capabilities_of(self.sm):
            return ()
        if self._watch is None:
            trusted = self.trusted_sm_guids or tuple(getattr(getattr(self.sm, "config", None), "trusted_sm_guids", ()))
            self._watch = self.sm.watcher(trusted)
        return tuple(str(s) for s in self._watch.check())

    def observe(self) -> IbFabricState:
        return self.sm.observe()

    def apply(self, plan: FabricPlan) -> IbFabricState:
        assert isinstance(plan, IbPlan)
        if plan.empty or plan.layout is None:
            return IbFabricState()
        return IbFabricState(tables=tuple(self.sm.apply(plan.layout)))

    def contain(self, tenancy: Tenancy, desired: Any, observed: IbFabricState, repair: bool) -> Containment:
        """Rogue SMs in ``observed``; with ``repair`` (OpenSM only) each is cut off at its switch
        port, the trusted SM restarted with the intended layout and every table verified by SMP
        (a driver with :data:`~.drivers.base.CONTAIN`)."""
        trusted = self.trusted_sm_guids or tuple(getattr(getattr(self.sm, "config", None), "trusted_sm_guids", ()))
        places = Places.of(p for n in tenancy.nodes for p in instance_ports(n, self.instance))
        findings = find_rogue_sms(observed, trusted, places)
        if not findings or not repair or CONTAIN not in capabilities_of(self.sm):
            return Containment(tuple(str(f) for f in findings))
        report = self.sm.contain_rogue(reachable(desired, observed).layout, RoguePolicy.CONTAIN, places)
        alerts = tuple(f"not contained ({why}): {f}" for f, why in report.alerts)
        return Containment(tuple(str(f) for f in report.findings) + alerts, tuple(str(g) for g in report.contained))

    def site_checks(self, context: SiteContext) -> Sequence[SiteCheck]:
        if self.checks is None:
            return ()
        trusted = self.trusted_sm_guids or tuple(getattr(getattr(self.sm, "config", None), "trusted_sm_guids", ()))
        if self.pool is None:  # config.yaml's pool, in ctx.segments
            return self.checks(self.sm, trusted, context, instance=self.instance)
        return self.checks(self.sm, trusted, context, pool_field(self.instance), self.pool, self.instance)

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """What the SM driver reports about its own transport (audit ``TRANSPORT-INSECURE``)."""
        notes = getattr(self.sm, "transport_notes", None)
        return tuple(notes()) if callable(notes) else ()

    def close(self) -> None:
        close = getattr(self.sm, "close", None)
        if callable(close):
            close()
