"""The invariant registry, the audit run and the exit-code rule (fabric-neutral).

``CORE`` are the invariants the audit checks itself (across fabrics, through the seam);
every fabric kind declares its own (``FabricKind.invariants``) and checks them in
``FabricKind.audit``. :func:`registry_for` collects both from the registered kinds;
:func:`run_audit` builds the shared context once, runs each selected core check and each
kind's audit, and returns a sorted ``AuditReport``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from gpufabric.audit.checks_cross import (
    SPLIT_FABRICS_ID,
    SPLIT_ID,
    TRANSPORT_ID,
    AuditContext,
    has_port_view,
    node_split,
    node_split_fabrics,
    passthrough,
)
from gpufabric.audit.model import AuditInput, AuditReport, Finding, InvariantInfo, Severity, Violation
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import FabricKind
from gpufabric.domain.findings import DRIFT

CheckFn = Callable[[AuditInput, AuditContext], Iterable[Finding]]


@dataclass(frozen=True)
class Invariant:
    id: str
    severity: Severity
    fabric: str  # the kind's name, or "cross", for documentation and grouping
    description: str  # one line
    check: CheckFn | None = None  # None: checked by the kind named ``fabric`` (its ``audit``)
    external: bool = False  # findings (also) come from AuditInput.extra_findings

    def info(self) -> InvariantInfo:
        return InvariantInfo(self.id, self.severity, self.fabric, self.description)


SPLIT: Final = Invariant(SPLIT_ID, Severity.CRITICAL, "cross",
                         "A node's ports on all fabrics do not all belong to one tenant (or quarantine).", node_split)
DRIFTED: Final = Invariant(DRIFT, Severity.MEDIUM, "cross",
                           "The store/desired state disagrees with the fabric: a port is unobserved or configured otherwise.")
SPLIT_FABRICS: Final = Invariant(SPLIT_FABRICS_ID, Severity.CRITICAL, "cross",
                                 "A node's resources on different fabrics (NVLink, DPU, ... included) belong to different tenants.",
                                 node_split_fabrics)
TRANSPORT: Final = Invariant(TRANSPORT_ID, Severity.HIGH, "cross",
                             "A driver's transport is configured below the secure default (SSH host keys unchecked, UFM over http or TLS unverified, OVSDB/OVN over tcp:, Kubernetes TLS unverified or over http, Fabric Manager over TCP).",
                             passthrough(TRANSPORT_ID), external=True)
CORE: Final[tuple[Invariant, ...]] = (SPLIT, DRIFTED, TRANSPORT)
"""The fabric-neutral invariants of every registry (``X-NODE-SPLIT-FABRICS`` joins them when
a kind has no per-port view)."""  # fmt: skip


@dataclass(frozen=True)
class InvariantRegistry:
    """The invariants one audit may check and the kinds that check theirs."""

    invariants: tuple[Invariant, ...] = CORE
    kinds: tuple[FabricKind[Any, Any], ...] = ()

    def __post_init__(self) -> None:
        ids = [i.id for i in self.invariants]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValidationError("invariant.id", dupes[0], "unique invariant ids")

    def __iter__(self) -> Iterator[Invariant]:
        return iter(self.invariants)

    def ids(self) -> tuple[str, ...]:
        return tuple(i.id for i in self.invariants)

    def get(self, inv_id: str) -> Invariant:
        for i in self.invariants:
            if i.id == inv_id:
                return i
        raise ValidationError("invariant", inv_id, ", ".join(self.ids()))

    def select(self, only: Collection[str] | None = None) -> tuple[Invariant, ...]:
        """The invariants named in ``only`` (registry order), or all of them."""
        if only is None:
            return self.invariants
        for inv_id in only:
            self.get(inv_id)
        return tuple(i for i in self.invariants if i.id in only)


def registry_for(kinds: Iterable[FabricKind[Any, Any]]) -> InvariantRegistry:
    """Every kind's invariants (in kind order), then the core ones."""
    kinds = tuple(kinds)
    specs = {s.id: (k.name, s) for k in kinds for s in k.invariants()}  # once, however many instances a kind has
    own = [Invariant(s.id, Severity(s.severity), kind, s.description, None, s.external)
           for kind, s in specs.values()]  # fmt: skip
    core = [SPLIT, DRIFTED, *([SPLIT_FABRICS] if any(not has_port_view(k) for k in kinds) else []), TRANSPORT]
    return InvariantRegistry((*own, *core), kinds)


DEFAULT_REGISTRY: Final = InvariantRegistry()
"""The core invariants alone (no fabric kind): the service uses ``registry_for(kinds)``."""


def _kind_violations(
    registry: InvariantRegistry, ctx: AuditContext, selected: set[str]
) -> Iterator[Violation]:
    for k in registry.kinds:
        mine = {s.id for s in k.invariants()} | {DRIFT}
        if mine.isdisjoint(selected):
            continue
        for v in k.audit(ctx.tenancy, ctx.desired_of(k.instance), ctx.observed[k.instance]):
            if v.invariant not in mine:
                raise ValidationError(f"{k.instance}.audit().invariant", v.invariant, ", ".join(sorted(mine)))
            if v.invariant in selected:  # a finding the kind names by its kind names its instance
                yield v if v.fabric != k.name else dataclasses.replace(v, fabric=k.instance)


def run_audit(
    inp: AuditInput,
    *,
    only: Collection[str] | None = None,
    registry: InvariantRegistry = DEFAULT_REGISTRY,
    now: datetime | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> AuditReport:
    """Check every selected invariant against ``inp``.

    ``now`` stamps the report (default: the current UTC time); ``clock`` measures the
    duration. Raises ``ValidationError`` for an unknown id in ``only``, for an extra
    finding that does not name a pass-through (external) invariant of the registry, and
    for a kind's finding of an invariant it did not declare.
    """
    external = {i.id for i in registry if i.external}
    for v in inp.extra_findings:
        if v.invariant not in external:
            raise ValidationError("extra_findings.invariant", v.invariant, ", ".join(sorted(external)) or "none")
    selected = registry.select(only)
    started = clock()
    ctx = AuditContext.build(inp, registry.kinds)
    violations: list[Violation] = []
    for inv in selected:
        if inv.check is not None:
            violations.extend(f.violation(inv.id, inv.severity) for f in inv.check(inp, ctx))
        elif inv.external:
            violations.extend(f.violation(inv.id, inv.severity) for f in passthrough(inv.id)(inp, ctx))
    violations.extend(_kind_violations(registry, ctx, {i.id for i in selected}))
    violations.sort(key=Violation.sort_key)
    duration = clock() - started
    return AuditReport(
        generated_at=now or datetime.now(UTC),
        duration_seconds=duration,
        checked=tuple(i.id for i in selected),
        violations=tuple(violations),
        about=tuple(i.info() for i in selected),
    )


def exit_code(report: AuditReport, fail_on: Severity = Severity.HIGH) -> int:
    """1 when any violation is at or above ``fail_on``, else 0."""
    return 1 if any(v.severity.rank >= fail_on.rank for v in report.violations) else 0


def invariants_markdown(registry: InvariantRegistry = DEFAULT_REGISTRY) -> str:
    """The invariant table of docs/audit.md, generated from a registry."""
    lines = ["| id | severity | fabric | description |", "| --- | --- | --- | --- |"]
    lines += [f"| `{i.id}` | {i.severity.value} | {i.fabric} | {i.description} |" for i in registry]
    return "\n".join(lines) + "\n"



