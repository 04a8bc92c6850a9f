"""The backend facet of a fabric kind: the I/O side of one instance (:class:`FabricBackend`:
observe the whole fabric, apply one plan and return its verified read-back, the move hooks,
metrics and containment) and how the kind builds it from its ``fabrics.yaml`` section."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from gpufabric.domain.drivers import DriverLookup
from gpufabric.domain.kind.identity import KindIdentity
from gpufabric.domain.kind.plan import FabricPlan
from gpufabric.domain.kind.site_check import BackendSiteChecks
from gpufabric.domain.moves import Move
from gpufabric.domain.tenancy import Tenancy

S = TypeVar("S")  # a fabric's observed slice


@dataclass(frozen=True)
class Containment:
    """What :meth:`FabricBackend.contain` found (one line each) and cut off (device ids)."""

    findings: tuple[str, ...] = ()
    contained: tuple[str, ...] = ()


class FabricBackend(BackendSiteChecks, ABC, Generic[S]):
    """The I/O side of one fabric in one deployment."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"observe", "apply"})

    @abstractmethod
    def observe(self) -> S:
        """Read the whole fabric's real state."""

    def observe_for_moves(self) -> S:
        """The state a move plans and verifies against: :meth:`observe`, less what only the audit
        reads (e.g. a DPU's datapath flows), which a fabric may leave out here. Default: observe()."""
        return self.observe()

    @abstractmethod
    def apply(self, plan: FabricPlan) -> S:
        """Apply ``plan`` (one transaction/session per device) and return the verified
        read-back of at least what it changed; raise a GpufabricError if it cannot."""

    def close(self) -> None:
        """Release connections (default: nothing to release)."""

    def before_move(self, tenancy: Tenancy, moves: Sequence[Move]) -> None:
        """Called once per batch before its quarantine phase changes anything, with ``tenancy``
        the owners before the move: refuse (raise a GpufabricError naming the node) moves this
        fabric cannot carry out, and prepare the nodes (e.g. drain them). A refusal cancels the
        batch with every fabric unchanged. Default: nothing."""

    def after_join(self, tenancy: Tenancy, moves: Sequence[Move]) -> None:
        """Called once per batch after its join phase is verified, with ``tenancy`` the new
        owners (e.g. make the nodes schedulable again). Default: nothing."""

    def metrics(self, tenancy: Tenancy) -> str:
        """This fabric's own series for ``/metrics``, in Prometheus text format, read now
        (``serve`` caches them between scrapes). Default: none."""
        return ""

    def contain(self, tenancy: Tenancy, desired: Any, observed: S, repair: bool) -> Containment:
        """Find intruders this fabric can see (e.g. rogue subnet managers) and, with
        ``repair``, cut them off (capability ``contain``). Default: none."""
        return Containment()


class KindBackend(KindIdentity, Generic[S]):
    """How a kind builds the backend of one of its instances."""

    @abstractmethod
    def build(self, section: Any, drivers: DriverLookup, settings: Mapping[str, Any]) -> FabricBackend[S]:
        """The backend for this fabric's section of ``fabrics.yaml`` (raise ConfigError)."""
