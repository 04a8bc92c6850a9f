"""The plan facet of a fabric kind (pure): its slice of the desired state, the
:class:`FabricPlan` that turns an observed slice into it, and what a desired slice reads back as."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar

from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.kind.identity import KindIdentity
from gpufabric.domain.tenancy import Tenancy

D = TypeVar("D")  # a fabric's desired slice
S = TypeVar("S")  # a fabric's observed slice


class FabricPlan(ABC):
    """The immutable, printable changes of one fabric. ``split()`` gives the part that only
    removes access (applied and verified on every fabric before any addition) and the rest."""

    fabric: ClassVar[str]

    @property
    @abstractmethod
    def empty(self) -> bool: ...

    @abstractmethod
    def lines(self) -> list[str]:
        """One human-readable line per change."""

    @abstractmethod
    def to_dict(self) -> Any:
        """JSON-able form (for ``--json`` and the API)."""

    @abstractmethod
    def split(self) -> tuple[FabricPlan, FabricPlan]:
        """(removals, additions): applying the first alone never grants any access."""

    def refusals(self) -> Mapping[str, GpufabricError]:
        """node -> why this plan leaves out what would give that node its tenant (the rest of the
        plan, the node's removals included, is made). The move engine fails the move that joins
        such a node alone, with that error; every other plan goes on. Default: none."""
        return {}

    def __len__(self) -> int:
        return len(self.lines())

    def __str__(self) -> str:
        return "\n".join(self.lines()) or "no changes"


class KindPlan(KindIdentity, Generic[D, S]):
    """Desired state and plan (pure)."""

    @abstractmethod
    def desired(self, tenancy: Tenancy) -> D:
        """This fabric's slice of the desired state."""

    @abstractmethod
    def diff(self, desired: D, observed: S) -> FabricPlan:
        """The changes that turn ``observed`` into ``desired`` (for what the fabric can program)."""

    @abstractmethod
    def as_observed(self, desired: D) -> S:
        """What ``desired`` reads back as (previews of later phases)."""

    @abstractmethod
    def empty_state(self) -> S:
        """The observed value of a fabric not yet read."""

    def merge(self, observed: S, read_back: S) -> S:
        """``observed`` updated with a (possibly partial) verified read-back."""
        return read_back

    @abstractmethod
    def tenants_seen(self, observed: S, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
        """node -> the tenants (or QUARANTINE) whose resources its ports hold in ``observed``.
        A node mapped to two tenants is split across tenants (must never happen)."""
