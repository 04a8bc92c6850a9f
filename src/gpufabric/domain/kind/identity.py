"""The identity facet of a fabric kind, the base of every other facet: the kind's ``name`` and
``order``, and the fabric instance (and its ``fabrics.yaml`` section) an object is bound to."""

from __future__ import annotations

import copy
from abc import ABC
from typing import Any, ClassVar, Self

from gpufabric.domain.values import check_name


class KindIdentity(ABC):
    """Which kind this is and which of its instances an object drives. Objects are stateless but
    for the instance they are bound to and its ``fabrics.yaml`` section (:meth:`bind`)."""

    name: ClassVar[str]
    order: ClassVar[int] = 100
    """Where this kind's instances come among the kinds (columns, phases, listings): lower first;
    kinds of one order by name. The Ethernet and InfiniBand kinds set theirs below the default."""

    @property
    def instance(self) -> str:
        """The fabric instance this object drives (default: the kind's own name)."""
        bound: str | None = self.__dict__.get("_instance")
        return bound or self.name

    @property
    def section(self) -> Any:
        """The ``fabrics.yaml`` section of the instance this object is bound to (None: bound
        without one, e.g. a kind's default instance): what the pure side reads of its own
        instance (e.g. an InfiniBand subnet's own segment pool)."""
        return self.__dict__.get("_section")

    def bind(self, instance: str, section: Any = None) -> Self:
        """This kind bound to the fabric instance ``instance`` and its ``fabrics.yaml``
        ``section`` (a shallow copy)."""
        check_name("fabrics[].name", instance)
        other = copy.copy(self)
        other.__dict__["_instance"] = instance
        other.__dict__["_section"] = section
        return other
