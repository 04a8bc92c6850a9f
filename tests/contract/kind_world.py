"""Generated tenancies over any set of fabric kinds (their :class:`~contract.kinds.KindCase`
factories), and the pure move runner the conformance suite checks phases with.

A node's ports are the union of each kind's parts; network ``i`` (two per tenant) has each
kind's segment ``i``; a lease takes each kind's lease fields and one of every offering any
kind brings. Applying a plan is each fabric applying its part, one after the other in a given
order, through its simulated backend and its own ``merge``; every state in between is kept.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.models import BUILTIN_OFFERINGS, QUARANTINE, Lease, Network, Node, Offering
from gpufabric.domain.state import FabricState
from gpufabric.planning.desired import DesiredState, derive_desired, tenancy_of
from gpufabric.planning.plan import Plan, plan, tenants_seen

from contract.kinds import TENANTS, KindCase

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class World:
    """The kinds under test and what their cases bring (networks, offerings, settings)."""

    def __init__(self, cases: Sequence[KindCase]) -> None:
        self.cases = {c.name: c for c in cases}
        self.kinds: list[FabricKind[Any, Any]] = [c.kind for c in cases]
        self.networks = tuple(
            Network(f"{t}-n{k}", t, tuple(s for c in cases if (s := c.segment(i)) is not None))
            for i, (t, k) in enumerate(itertools.product(TENANTS, range(2)))
        )
        offerings: dict[str, Offering] = {o.name: o for o in BUILTIN_OFFERINGS}
        for c in cases:
            offerings |= {o.name: o for o in c.offerings}
        self.offerings = tuple(offerings.values())
        self.settings = {k: v for c in cases for k, v in c.settings.items()}

    # ---- generated inputs
    def inventories(self, max_nodes: int = 4) -> st.SearchStrategy[tuple[Node, ...]]:
        @st.composite
        def draw_nodes(draw: st.DrawFn) -> tuple[Node, ...]:
            nodes = []
            for i in range(draw(st.integers(1, max_nodes))):
                name = f"n{i}"
                parts: dict[str, Any] = {}
                for c in self.cases.values():
                    own = dict(c.node(draw, name, i))
                    own["fabric_ports"] = (*parts.get("fabric_ports", ()), *own.get("fabric_ports", ()))
                    parts |= own
                nodes.append(Node(name, fabric_ports=tuple(sorted(parts.get("fabric_ports", ())))))
            return tuple(nodes)

        return draw_nodes()

    def lease(self, draw: st.DrawFn, node: Node, tenant: str) -> list[Lease]:
        """``tenant``'s lease of ``node`` (none in quarantine), with 1-2 of its networks."""
        if tenant == QUARANTINE:
            return []
        mine = [n.name for n in self.networks if n.tenant == tenant]
        nets = draw(st.lists(st.sampled_from(mine), min_size=1, max_size=2, unique=True))
        fields: dict[str, Any] = {"offering": draw(st.sampled_from([o.name for o in self.offerings]))}
        terms: list[tuple[str, int]] = []
        for c in self.cases.values():
            own = dict(c.lease(draw, node))
            terms += own.pop("terms", ())  # each kind's own lease terms, side by side
            fields |= own
        return [Lease(tenant, node.name, T0, networks=tuple(sorted(nets)), terms=tuple(terms), **fields)]

    def leases(self, draw: st.DrawFn, nodes: tuple[Node, ...]) -> list[Lease]:
        return [x for n in nodes for x in self.lease(draw, n, draw(st.sampled_from((QUARANTINE, *TENANTS))))]

    def desired(self, nodes: tuple[Node, ...], leases: Sequence[Lease]) -> DesiredState:
        tenancy = tenancy_of(nodes, leases, self.networks, self.offerings, self.settings)
        return derive_desired(self.kinds, tenancy)

    def observed(self, draw: st.DrawFn, want: DesiredState) -> FabricState:
        return FabricState(slices={n: c.observed(draw, want.tenancy) for n, c in self.cases.items()})

    # ---- applying plans (pure)
    def apply_plan(self, state: FabricState, p: Plan, order: Sequence[str] | None = None) -> list[FabricState]:
        """Every state seen while the fabrics apply ``p`` one after the other, in ``order``."""
        parts = dict(p.fabrics)
        seen = []
        for name in order or tuple(parts):
            c = self.cases[name]
            state = state.with_slice(name, c.apply(state.get(name, c.kind.empty_state()), parts[name]))
            seen.append(state)
        return seen

    def assert_never_split(self, want: DesiredState, states: list[FabricState], where: str) -> None:
        for i, s in enumerate(states):
            for node, tenants in tenants_seen(self.kinds, want, s).items():
                assert len(tenants - {QUARANTINE}) <= 1, f"{where} step {i}: {node} in {sorted(tenants)}"

    def run_phase(self, want: DesiredState, state: FabricState, order: Sequence[str], where: str) -> FabricState:
        """One converge phase: removals on every fabric (in ``order``), then additions; no
        state in between splits a node, and the phase ends converged."""
        removals, additions = plan(self.kinds, want, state).split()
        seen = self.apply_plan(state, removals, order)
        seen += self.apply_plan(seen[-1], additions, order)
        self.assert_never_split(want, seen, where)
        rest = plan(self.kinds, want, seen[-1])
        assert rest.empty, f"{where}: not converged: {rest.lines()[:5]}"
        return seen[-1]
