"""A lease's terms: what a lease (and the request and move that grant it) asks of a fabric kind
beyond the core's tenant, networks and offering, e.g. how many of a node's GPUs it holds.

The core carries them without knowing any. A kind declares each term it reads as a
:class:`TermSpec` (``FabricKind.lease_terms``): its name (the field of the API's move, lease and
preview bodies and of a lease's answer, the key of the stored JSON), its range and how an error
says it. A value travels as :data:`LeaseTerms` (``(name, value)`` pairs sorted by name) on
``Lease``, ``MoveRequest`` and ``Move``; the store keeps one JSON object per lease and per move
(``terms``, migration 0014). :func:`check_terms` refuses a term no kind declares or a value out
of its range, before anything is written; whether a node can hold a value is the declaring kind's
to say (``FabricKind.check_request``), and its ``desired()`` reads it (``lease.term(name)``).
The values themselves (``LeaseTerms``, ``terms_of``, ``term``, ``terms_json``) are
:mod:`gpufabric.domain.lease_terms`'s, re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.lease_terms import LeaseTerms as LeaseTerms
from gpufabric.domain.lease_terms import term as term
from gpufabric.domain.lease_terms import terms_json as terms_json
from gpufabric.domain.lease_terms import terms_of as terms_of


@dataclass(frozen=True)
class TermSpec:
    """One term a fabric kind reads of a lease: an integer in ``minimum..maximum``, or unset."""

    name: str
    minimum: int
    maximum: int
    allowed: str
    """How a ValidationError says the range (e.g. ``1-16 GPUs, or unset for the whole node``)."""
    description: str = ""
    """What it asks for, as the API's field and the CLI's option describe it."""

    def check(self, field: str, value: object) -> int:
        """``value`` if it is an integer in range, else a ValidationError naming ``field``."""
        if isinstance(value, bool) or not isinstance(value, int) or not self.minimum <= value <= self.maximum:
            raise ValidationError(field, value, self.allowed)
        return value


def check_terms(terms: LeaseTerms, specs: Iterable[TermSpec], prefix: str = "") -> LeaseTerms:
    """``terms`` checked against the declared ``specs``: a ValidationError naming
    ``<prefix><name>`` and its range for a value out of it, or ``<prefix>terms`` listing the
    declared names for a term no kind declares."""
    by_name = {s.name: s for s in specs}
    for name, value in terms:
        spec = by_name.get(name)
        if spec is None:
            raise ValidationError(f"{prefix}terms", name, ", ".join(sorted(by_name)) or "none (no fabric kind declares a term)")
        spec.check(f"{prefix}{name}", value)
    return terms



class DeclaresTerms(Protocol):
    """What :func:`declared_terms` reads of a fabric kind (its terms facet,
    :class:`~gpufabric.domain.kind.terms.KindTerms`)."""

    @property
    def name(self) -> str: ...

    @property
    def lease_terms(self) -> tuple[TermSpec, ...]: ...


def declared_terms(kinds: Iterable[DeclaresTerms]) -> tuple[TermSpec, ...]:
    """Every lease term ``kinds`` declare (``FabricKind.lease_terms``), by name; a name two kinds
    declare is a ConfigError naming both (a term has one owner)."""
    owner: dict[str, str] = {}
    out: dict[str, TermSpec] = {}
    for k in kinds:
        for spec in k.lease_terms:
            if owner.setdefault(spec.name, k.name) != k.name:
                raise ConfigError(f"{k.name}.lease_terms", spec.name, f"a name no other kind declares ({owner[spec.name]} does)")
            out[spec.name] = spec
    return tuple(out[name] for name in sorted(out))
