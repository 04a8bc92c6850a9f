"""The lease-terms facet of a fabric kind: the terms of a lease it reads (:mod:`gpufabric.domain.terms`),
its refusal of a request a node cannot hold, and the offering settings it shows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from gpufabric.domain.kind.identity import KindIdentity
from gpufabric.domain.models import Node
from gpufabric.domain.moves import MoveRequest
from gpufabric.domain.terms import TermSpec


class KindTerms(KindIdentity):
    """A lease's terms and an offering's settings a kind reads are its own."""

    lease_terms: ClassVar[tuple[TermSpec, ...]] = ()
    """The lease terms this kind reads (e.g. a count of GPUs): fields of the API's move and lease bodies and
    answers, checked against their range and stored with the lease; ``desired()`` reads ``lease.term(name)``."""

    def check_request(self, node: Node, request: MoveRequest) -> None:
        """Refuse, before any write, a request of :attr:`lease_terms` ``node`` cannot hold (ValidationError)."""

    offering_settings: ClassVar[Mapping[str, str]] = {}
    """``Offering.settings`` keys this kind reads that an offering's answer shows as fields of their own,
    each with its value when unset (the DPU kind's OVN-Kubernetes mode)."""
