"""Per-kind fixture factories of the ``FabricKind`` conformance suite
(tests/contract/test_fabric_kind_contract.py), one module per kind, each exporting ``CASE``.

A :class:`KindCase` says, for one kind, how to give a node ports on that fabric, what segment
network ``i`` has on it, which lease fields and offerings its leases use, the deployment
settings it reads, how to draw an arbitrary *observed* state of a tenancy's nodes (what the
real fabric could hold, drift included), and a pure simulator of its backend's ``apply``: the
verified read-back the backend would return after applying a plan to a state (which the suite
then folds in with the kind's own ``merge``, as the move engine does).

A new kind adds one file here; :func:`all_cases` finds it, and the suite refuses a kind
registered under the ``gpufabric.fabrics`` entry points that has no case.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from gpufabric.domain.fabric import FabricKind, FabricPlan, Tenancy
from gpufabric.domain.models import Node, Offering, Segment

TENANTS = ("ta", "tb", "tc")
"""The tenants every generated tenancy draws from (and observed states may hold)."""

NodeParts = Callable[[st.DrawFn, str, int], Mapping[str, Any]]
"""(draw, node name, node index) -> ``Node`` keyword arguments: the node's ports on this fabric."""


def _no_parts(draw: st.DrawFn, name: str, i: int) -> Mapping[str, Any]:
    return {}


def _no_segment(i: int) -> Segment | None:
    return None


def _no_lease_fields(draw: st.DrawFn, node: Node) -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True)
class KindCase:
    kind: FabricKind[Any, Any]
    observed: Callable[[st.DrawFn, Tenancy], Any]
    """(draw, tenancy) -> an arbitrary observed state of the tenancy's nodes on this fabric."""
    read_back: Callable[[Any, FabricPlan], Any]
    """(state, non-empty plan) -> what the backend returns after applying the plan to state."""
    node: NodeParts = _no_parts
    segment: Callable[[int], Segment | None] = _no_segment
    lease: Callable[[st.DrawFn, Node], Mapping[str, Any]] = _no_lease_fields
    offerings: tuple[Offering, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    records_owner: bool = True
    """The fabric's state says whose resources a node holds (a VLAN, a PKey, a tenant key),
    so any state can be checked for a split node, a direct move's too. False for a fabric
    whose ``tenants_seen`` can only credit the tenancy's owner (NVLink: Fabric Manager keeps
    no tenant labels): the suite checks its moves through quarantine, not direct ones."""

    @property
    def name(self) -> str:
        return self.kind.name

    def apply(self, state: Any, plan: FabricPlan) -> Any:
        """``state`` after the backend applied ``plan``: the kind's merge of its read-back."""
        if plan.empty:
            return state
        return self.kind.merge(state, self.read_back(state, plan))


def all_cases() -> tuple[KindCase, ...]:
    """Every ``CASE`` of this package's modules, by kind name."""
    out = []
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        case = getattr(mod, "CASE", None)
        assert isinstance(case, KindCase), f"{mod.__name__} must export CASE = KindCase(...)"
        out.append(case)
    return tuple(sorted(out, key=lambda c: c.name))
