"""The invariant registry, the audit run and the exit-code rule.

``INVARIANTS`` is a constant tuple; ``InvariantRegistry`` is a plain immutable object
over it (tests and callers may build their own). ``run_audit`` builds the indexes once,
runs each selected check, and returns a sorted ``AuditReport``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from gpufabric.audit import checks_cross, checks_eth, checks_ib, checks_trust
from gpufabric.audit.index import AuditIndex
from gpufabric.audit.model import AuditInput, AuditReport, Finding, Severity, Violation
from gpufabric.domain.errors import ValidationError

CheckFn = Callable[[AuditInput, AuditIndex], Iterable[Finding]]


@dataclass(frozen=True)
class Invariant:
    id: str
    severity: Severity
    fabric: str  # "ethernet", "infiniband" or "cross", for documentation and grouping
    description: str  # one line
    check: CheckFn
    external: bool = False  # findings come from AuditInput.extra_findings


INVARIANTS: Final[tuple[Invariant, ...]] = (
    Invariant("ETH-VLAN-SHARED", Severity.CRITICAL, "ethernet",
              "A VLAN is carried by switch ports of nodes of two or more tenants (quarantine counts as one).",
              checks_eth.vlan_shared),
    Invariant("ETH-UNLEASED-NOT-QUARANTINED", Severity.HIGH, "ethernet",
              "A node without an active lease has a switch port neither shut down nor carrying exactly the quarantine VLAN.",
              checks_eth.unleased_not_quarantined),
    Invariant("ETH-TRUNK-FOREIGN-VLAN", Severity.CRITICAL, "ethernet",
              "A trunk port of a node carries (native or tagged) a VLAN that the node's tenant does not own.",
              checks_eth.trunk_foreign_vlan),
    Invariant("ETH-VLAN1", Severity.HIGH, "ethernet",
              "A managed switch port carries VLAN 1 (access, native or tagged).",
              checks_eth.vlan1),
    Invariant("IB-PKEY-SHARED", Severity.CRITICAL, "infiniband",
              "A PKey is held by ports of two or more tenants with at least one full member, so they can talk.",
              checks_ib.pkey_shared),
    Invariant("IB-GUID-FOREIGN-PKEY", Severity.CRITICAL, "infiniband",
              "A port GUID holds (full or limited) a PKey that its node's tenant does not own.",
              checks_ib.guid_foreign_pkey),
    Invariant("IB-DEFAULT-FULL-HOST", Severity.HIGH, "infiniband",
              "A port other than the SM node's is a full member (0xffff) of the default partition.",
              checks_ib.default_full_host),
    Invariant("IB-ROGUE-SM", Severity.CRITICAL, "infiniband",
              "A subnet manager seen on the fabric (the master or any other) is not a trusted SM GUID.",
              checks_ib.rogue_sm),
    Invariant("IB-PKEY-CAPACITY", Severity.MEDIUM, "infiniband",
              "A port needs more PKeys (observed or desired) than its PKey table capacity (PartitionCap).",
              checks_ib.pkey_capacity),
    Invariant("X-NODE-SPLIT", Severity.CRITICAL, "cross",
              "A node's ports on all fabrics do not all belong to one tenant (or quarantine).",
              checks_cross.node_split),
    Invariant("X-DRIFT", Severity.MEDIUM, "cross",
              "The store/desired state disagrees with the fabric: a port is unobserved or configured otherwise.",
              checks_cross.drift),
    Invariant(checks_cross.HARDENING_ID, Severity.HIGH, "infiniband",
              "SM/fabric hardening findings computed by the InfiniBand driver (M_Key, SM_Key, ...), passed through.",
              checks_cross.hardening, external=True),
    Invariant("IB-SM-GUID-MISMATCH", Severity.CRITICAL, "infiniband",
              "An SM's SMInfo claims a GUID other than the port discovered at the LID it answers from.",
              checks_trust.sm_guid_mismatch),
    Invariant(checks_trust.TRANSPORT_ID, Severity.HIGH, "cross",
              "A driver's transport is configured below the secure default (SSH host keys unchecked, UFM over http or TLS unverified, OVSDB/OVN over tcp:, Kubernetes TLS unverified or over http, Fabric Manager over TCP).",
              checks_trust.transport_insecure, external=True),
)  # fmt: skip


@dataclass(frozen=True)
class InvariantRegistry:
    invariants: tuple[Invariant, ...] = INVARIANTS

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


DEFAULT_REGISTRY: Final = InvariantRegistry()


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
    duration. Raises ``ValidationError`` for an unknown id in ``only`` and for an extra
    finding that does not name a pass-through (external) invariant of the registry.
    """
    external = {i.id for i in registry if i.external}
    for v in inp.extra_findings:
        if v.invariant not in external:
            raise ValidationError("extra_findings.invariant", v.invariant, ", ".join(sorted(external)) or "none")
    selected = registry.select(only)
    started = clock()
    idx = AuditIndex.build(inp)
    violations: list[Violation] = []
    for inv in selected:
        violations.extend(f.violation(inv.id, inv.severity) for f in inv.check(inp, idx))
    violations.sort(key=Violation.sort_key)
    duration = clock() - started
    return AuditReport(
        generated_at=now or datetime.now(UTC),
        duration_seconds=duration,
        checked=tuple(i.id for i in selected),
        violations=tuple(violations),
    )


def exit_code(report: AuditReport, fail_on: Severity = Severity.HIGH) -> int:
    """1 when any violation is at or above ``fail_on``, else 0."""
    return 1 if any(v.severity.rank >= fail_on.rank for v in report.violations) else 0


def invariants_markdown(registry: InvariantRegistry = DEFAULT_REGISTRY) -> str:
    """The invariant table of docs/audit.md, generated from the registry."""
    lines = ["| id | severity | fabric | description |", "| --- | --- | --- | --- |"]
    lines += [f"| `{i.id}` | {i.severity.value} | {i.fabric} | {i.description} |" for i in registry]
    return "\n".join(lines) + "\n"
