"""The fabric kinds' fields of the v1 schemas, built from what the registered kinds declare: each
lease term (``FabricKind.lease_terms``, e.g. how many of a node's GPUs) is a field of the move,
lease and preview bodies, in its declared range, and of a lease's answer (null when unset); each
offering setting a kind shows (``FabricKind.offering_settings``) is a field of an offering's
answer. (A node entry's own inventory key is ``schemas._kind_keys``'.)"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, create_model

from gpufabric.domain.terms import LeaseTerms, terms_of
from gpufabric.store.registry import registered_offering_fields, registered_terms


def term_fields(answer: bool = False) -> dict[str, Any]:
    """A field per declared lease term: in a body optional and in range; in an answer, null when unset."""
    if answer:
        return {t.name: (int | None, Field(description=t.description)) for t in registered_terms()}
    return {t.name: (int | None, Field(None, ge=t.minimum, le=t.maximum, description=t.description))
            for t in registered_terms()}  # fmt: skip


def with_terms(base: type[BaseModel], answer: bool = False) -> Any:
    """``base`` with a field per declared lease term (named as ``base`` without its leading ``_``)."""
    return create_model(base.__name__.lstrip("_"), __base__=base, **term_fields(answer))


def with_offering_fields(base: type[BaseModel]) -> Any:
    """``base`` with a field per offering setting a kind shows (named as ``base`` without its ``_``)."""
    fields: dict[str, Any] = {
        k: (str, Field(description=f"A fabric kind's setting of the offering ({unset!r} when unset)"))
        for k, unset in registered_offering_fields().items()
    }
    return create_model(base.__name__.lstrip("_"), __base__=base, **fields)


def body_terms(body: BaseModel) -> LeaseTerms:
    """The lease terms a move, lease or preview body sets (its term fields; unset ones left out)."""
    return terms_of((t.name, getattr(body, t.name, None)) for t in registered_terms())
