"""The fabric-neutral invariants: across fabrics, through the seam only (pure).

* ``X-NODE-SPLIT``: every port of a node, on every fabric that reports its ports
  (:meth:`FabricKind.ports_seen`), is in the same tenant (or quarantine). A port's *effective*
  tenants are the owners of what it really carries (an Ethernet port's VLANs, an IB port's
  non-default PKeys, ...); a node is split when its ports' effective tenants together are two
  or more, and each port whose effective tenants are not exactly the node's tenant (per the
  store) is flagged. A node with active leases of several tenants is flagged too.
* ``X-NODE-SPLIT-FABRICS``: a node's resources on different fabrics belong to different
  tenants (quarantine left out, per :meth:`FabricKind.tenants_seen`) and a fabric without a
  per-port view (NVLink, DPU, ...) is involved; checked when the registry has such a kind.
* ``X-DRIFT`` is reported by every kind's own ``audit`` (its ports); ``TRANSPORT-INSECURE`` is
  passed through from the drivers' transport notes (``AuditInput.extra_findings``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.audit.model import AuditInput, Finding
from gpufabric.domain.fabric import FabricKind, PortSeen, Tenancy
from gpufabric.domain.models import QUARANTINE, Lease

SPLIT_ID: Final = "X-NODE-SPLIT"
SPLIT_FABRICS_ID: Final = "X-NODE-SPLIT-FABRICS"
TRANSPORT_ID: Final = "TRANSPORT-INSECURE"


def has_port_view(kind: FabricKind[Any, Any]) -> bool:
    """Whether ``kind`` reports its ports to ``X-NODE-SPLIT`` (implements ``ports_seen``)."""
    return type(kind).ports_seen is not FabricKind.ports_seen


@dataclass(frozen=True)
class AuditContext:
    """What the checks share: the owners of every node as one ``Tenancy`` (a node's tenant is
    its first active lease's, by tenant name; quarantine when it has none or is held there),
    every node's lease tenants, and the kinds with their observed and desired slices."""

    tenancy: Tenancy
    node_tenants: Mapping[str, tuple[str, ...]]  # only nodes with an active lease, sorted
    kinds: tuple[FabricKind[Any, Any], ...]
    observed: Mapping[str, Any]
    desired: Mapping[str, Any] | None

    @classmethod
    def build(cls, inp: AuditInput, kinds: Sequence[FabricKind[Any, Any]]) -> AuditContext:
        by_node: dict[str, dict[str, Lease]] = {}
        for lease in inp.leases:
            by_node.setdefault(lease.node, {}).setdefault(lease.tenant, lease)
        node_tenants = {n: tuple(sorted(ts)) for n, ts in by_node.items()}
        owners = {n.name: None if n.name in inp.held or n.name not in by_node else
                  by_node[n.name][node_tenants[n.name][0]] for n in inp.nodes}  # fmt: skip
        tenancy = Tenancy(
            nodes=inp.nodes,
            owners=owners,
            networks={(n.tenant, n.name): n for n in inp.networks},
            offerings={o.name: o for o in inp.offerings},
            settings=dict(inp.settings),
        )
        observed = {k.instance: inp.observed.get(k.instance, k.empty_state()) for k in kinds}
        return cls(tenancy, node_tenants, tuple(kinds), observed, inp.desired)

    def desired_of(self, fabric: str) -> Any:
        """The caller's desired slice of ``fabric``, ``None`` when not given."""
        return None if self.desired is None else self.desired.get(fabric)


def node_split(inp: AuditInput, ctx: AuditContext) -> Iterator[Finding]:
    """X-NODE-SPLIT: each port of a split node whose effective tenants are not exactly the
    node's tenant, and nodes with leases of several tenants.

    One cheap pass over the ports finds the split nodes (kinds share equal tenant sets, so
    most comparisons are identity checks); only those are detailed.
    """
    seen: list[PortSeen] = []
    first: dict[str, frozenset[str]] = {}
    split: set[str] = set()
    for k in ctx.kinds:
        if not has_port_view(k):
            continue
        for p in k.ports_seen(ctx.observed[k.instance], ctx.tenancy):
            seen.append(p)
            was = first.get(p.node)
            if was is None:
                first[p.node] = p.tenants
                if len(p.tenants) > 1:
                    split.add(p.node)
            elif was is not p.tenants and was != p.tenants:
                split.add(p.node)
    details: dict[str, list[PortSeen]] = {}
    for p in seen:
        if p.node in split:
            details.setdefault(p.node, []).append(p)
    for node in inp.nodes:
        leased = ctx.node_tenants.get(node.name, ())
        if len(leased) > 1:
            yield Finding(f"node {node.name} has active leases of tenants {', '.join(leased)}", node=node.name,
                          tenants=leased)  # fmt: skip
        mine = details.get(node.name)
        if not mine:
            continue
        union = sorted({t for p in mine for t in p.tenants})
        expected = ctx.tenancy.owner(node.name)
        for p in mine:
            if p.tenants == {expected}:
                continue
            yield Finding(
                f"node {node.name} (tenant {expected}) is split across {', '.join(union)}: "
                f"{p.label} is in {', '.join(sorted(p.tenants))}",
                fabric=p.fabric, device=p.device, port=str(p.port), node=node.name, tenants=tuple(union),
            )  # fmt: skip


def node_split_fabrics(inp: AuditInput, ctx: AuditContext) -> Iterator[Finding]:
    """X-NODE-SPLIT-FABRICS: a node's tenants (quarantine left out) across every fabric are two
    or more, and a fabric without a per-port view holds some of them."""
    seen = {k.instance: k.tenants_seen(ctx.observed[k.instance], ctx.tenancy) for k in ctx.kinds}
    port_view = {k.instance for k in ctx.kinds if has_port_view(k)}
    for node in sorted({n for m in seen.values() for n in m}):
        tenants = {f: t - {QUARANTINE} for f, m in seen.items() if (t := m.get(node))}
        every = frozenset().union(*tenants.values()) if tenants else frozenset()
        if len(every) > 1 and any(f not in port_view for f, t in tenants.items() if t):
            where = "; ".join(f"{f}: {', '.join(sorted(t))}" for f, t in sorted(tenants.items()) if t)
            yield Finding(f"node {node} is split across tenants ({where})", fabric="cross", node=node,
                          tenants=tuple(sorted(every)))  # fmt: skip


def passthrough(inv_id: str) -> Any:
    """A check that yields the extra findings naming ``inv_id``, as they are (severity kept)."""

    def check(inp: AuditInput, ctx: AuditContext) -> Iterator[Finding]:
        for v in inp.extra_findings:
            if v.invariant == inv_id:
                yield Finding(v.message, v.fabric, v.device, v.port, v.node, v.tenants, v.resource, v.severity)

    return check
