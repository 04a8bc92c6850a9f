"""The audit facet of a fabric kind: the invariants it checks (:class:`InvariantSpec`), its own
findings, and the ports whose effective tenants the cross-fabric ``X-NODE-SPLIT`` compares
(:class:`PortSeen`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from gpufabric.domain.findings import Violation
from gpufabric.domain.kind.identity import KindIdentity
from gpufabric.domain.tenancy import Tenancy

D = TypeVar("D")  # a fabric's desired slice
S = TypeVar("S")  # a fabric's observed slice


@dataclass(frozen=True)
class InvariantSpec:
    """An audit invariant a fabric checks (for docs/audit.md and ``--select``)."""

    id: str
    severity: str  # a Severity value
    description: str
    external: bool = False  # the caller may also hand in findings of it (AuditInput.extra_findings)


class PortSeen(NamedTuple):
    """One port of an inventory node and the tenants that own what it really carries (its
    *effective* tenants: owners of its VLANs, its non-default PKeys, ...; unowned resources and
    the default partition add none). The audit's ``X-NODE-SPLIT`` compares them across fabrics.
    A tuple, and ``port`` may be any object whose ``str()`` names the port (e.g. a ``Guid``):
    an audit makes one per port and formats only the few it reports."""

    node: str
    fabric: str
    device: str
    port: object
    tenants: frozenset[str]
    sep: str = " "  # between device and port in :attr:`label`

    @property
    def label(self) -> str:
        """How a message names the port, e.g. ``leaf1/p1`` or ``mlx5_0 0x...``."""
        return f"{self.device}{self.sep}{self.port}"


class KindAudit(KindIdentity, Generic[D, S]):
    """What a kind checks of its observed state."""

    def invariants(self) -> tuple[InvariantSpec, ...]:
        return ()

    def audit(self, tenancy: Tenancy, desired: D, observed: S) -> Iterable[Violation]:
        """Findings of this fabric's own invariants, and of the shared ``X-DRIFT``
        (:data:`~gpufabric.domain.findings.DRIFT`). The service always hands in the desired
        slice; an audit run without one (tests, ``AuditInput.desired`` left out) passes ``None``,
        which a kind that can (Ethernet, InfiniBand) takes as "skip desired-vs-observed
        comparisons". Default: none."""
        return ()

    def ports_seen(self, observed: S, tenancy: Tenancy) -> Iterable[PortSeen]:
        """Every inventory port with non-empty effective tenants in ``observed``. A kind that
        implements it takes part in the audit's per-port ``X-NODE-SPLIT``; the others in
        ``X-NODE-SPLIT-FABRICS`` (through :meth:`tenants_seen`). Default: none."""
        return ()
