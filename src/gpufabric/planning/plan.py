"""``plan(kinds, desired, observed) -> Plan``: the immutable, printable difference, one
:class:`~gpufabric.domain.fabric.FabricPlan` per fabric instance (keyed by
``FabricKind.instance``), computed by each instance's pure diff.

``Plan.split()`` separates what removes access (applied and verified on every fabric first)
from what grants it, so no intermediate state has a port in two tenants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.fabric import FabricKind, FabricPlan
from gpufabric.domain.state import FabricState
from gpufabric.planning.desired import DesiredState


@dataclass(frozen=True)
class Plan:
    fabrics: tuple[tuple[str, FabricPlan], ...] = ()

    @property
    def empty(self) -> bool:
        return all(p.empty for _, p in self.fabrics)

    def get(self, fabric: str) -> FabricPlan | None:
        return dict(self.fabrics).get(fabric)

    def nonempty(self) -> dict[str, FabricPlan]:
        return {n: p for n, p in self.fabrics if not p.empty}

    def counts(self) -> dict[str, int]:
        return {n: len(p) for n, p in self.fabrics}  # a FabricPlan's len is its number of lines

    def lines(self) -> list[str]:
        return [line for _, p in self.fabrics for line in p.lines()]

    def refusals(self) -> dict[str, GpufabricError]:
        """node -> the first fabric's refusal to give it its tenant (FabricPlan.refusals)."""
        out: dict[str, GpufabricError] = {}
        for _, p in self.fabrics:
            for node, e in p.refusals().items():
                out.setdefault(node, e)
        return out

    def split(self) -> tuple[Plan, Plan]:
        parts = [(n, p.split()) for n, p in self.fabrics]
        return Plan(tuple((n, r) for n, (r, _) in parts)), Plan(tuple((n, a) for n, (_, a) in parts))

    def __len__(self) -> int:
        return sum(len(p) for _, p in self.fabrics)

    def __str__(self) -> str:
        return "\n".join(self.lines()) or "no changes"

    def to_dict(self) -> dict[str, Any]:
        return {n: p.to_dict() for n, p in self.fabrics}


def plan(kinds: Sequence[FabricKind[Any, Any]], desired: DesiredState, observed: FabricState) -> Plan:
    """The changes that turn ``observed`` into ``desired`` on every fabric (pure)."""
    return Plan(
        tuple((k.instance, k.diff(desired.get(k.instance), observed.get(k.instance, k.empty_state()))) for k in kinds)
    )


def as_observed(kinds: Sequence[FabricKind[Any, Any]], desired: DesiredState) -> FabricState:
    """The fabric state ``desired`` would read back as (for previews of later phases)."""
    return FabricState(slices={k.instance: k.as_observed(desired.get(k.instance)) for k in kinds})


def merge(kinds: Sequence[FabricKind[Any, Any]], observed: FabricState, read_back: Mapping[str, Any]) -> FabricState:
    """``observed`` updated with each fabric's (partial) verified read-back."""
    out = observed
    for k in kinds:
        if k.instance in read_back:
            out = out.with_slice(k.instance, k.merge(observed.get(k.instance, k.empty_state()), read_back[k.instance]))
    return out


def tenants_seen(
    kinds: Sequence[FabricKind[Any, Any]], desired: DesiredState, observed: FabricState
) -> dict[str, frozenset[str]]:
    """node -> every tenant (or quarantine) whose resources its ports hold on any fabric."""
    out: dict[str, set[str]] = {}
    for k in kinds:
        for node, tenants in k.tenants_seen(observed.get(k.instance, k.empty_state()), desired.tenancy).items():
            out.setdefault(node, set()).update(tenants)
    return {n: frozenset(t) for n, t in out.items()}
