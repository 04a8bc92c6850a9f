"""The fabric seam: what one fabric package provides so that the core (desired state, plan,
apply, audit, CLI tables) iterates over the registered fabrics instead of naming them.

A fabric package ``gpufabric.fabrics.<fabric>`` (importing only ``gpufabric.domain``) provides

* a :class:`FabricKind` (pure): its segment allocator for a network, its slice of the desired
  state derived from a :class:`Tenancy`, its pure ``diff(desired, observed) -> FabricPlan``,
  the state a desired slice reads back as (previews), how a partial read-back merges into a
  full one, who owns what in an observed state (the two-tenant sampler), and its audit
  invariants;
* a :class:`FabricBackend` (I/O) built by ``FabricKind.build(section, drivers)`` from the
  fabric's section of ``fabrics.yaml``: ``observe()`` reads the whole fabric, ``apply(plan)``
  applies one plan (one transaction/session per device) and returns the *verified* read-back
  of what it changed.

:class:`FabricKind` is composed of named facets, one module of :mod:`gpufabric.domain.kind` per
file of the kind skeleton that implements it: identity and config (``bind``, ``top_level``),
inventory (a node's ports, import formats), terms, segments, backend (``build``; the backend's
site checks), plan, audit, views and slots (carving a shared host, issue 33). This module composes them and is the one a kind imports
the seam's names from (:class:`FabricPlan`, :class:`FabricBackend`, :class:`InvariantSpec`,
:class:`PortSeen`, :class:`Containment`, :class:`Tenancy`, :class:`DriverLookup`).

A deployment runs named *instances* of the kinds (``ib-compute``, ``ib-storage``: both ``infiniband``):
:meth:`FabricKind.bind` gives the kind object of one, whose :attr:`FabricKind.instance` keys its desired and
observed slices, plans, read-backs, segments, findings and ports (an unbound kind: its default instance, named
after it). A kind keeps a node's ports in the generic ``node_fabric_ports`` table (``ports_section``): it
parses and dumps a node's entries (``parse_ports``/``dump_ports``; :meth:`FabricKind.ports` reads them back).
A lease's terms and an offering's settings a kind reads are its own too (``lease_terms``, ``offering_settings``).

Kinds are registered under the ``gpufabric.fabrics`` entry-point group (name = fabric name),
drivers under ``gpufabric.drivers``. ``docs/fabrics.md`` says how to add one.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from gpufabric.domain.drivers import DriverLookup as DriverLookup
from gpufabric.domain.drivers import build_driver as build_driver
from gpufabric.domain.kind.audit import InvariantSpec as InvariantSpec
from gpufabric.domain.kind.audit import KindAudit
from gpufabric.domain.kind.audit import PortSeen as PortSeen
from gpufabric.domain.kind.backend import Containment as Containment
from gpufabric.domain.kind.backend import FabricBackend as FabricBackend
from gpufabric.domain.kind.backend import KindBackend
from gpufabric.domain.kind.config import KindConfig
from gpufabric.domain.kind.inventory import KindInventory
from gpufabric.domain.kind.plan import FabricPlan as FabricPlan
from gpufabric.domain.kind.plan import KindPlan
from gpufabric.domain.kind.segments import KindSegments
from gpufabric.domain.kind.slots import KindSlots
from gpufabric.domain.kind.terms import KindTerms
from gpufabric.domain.kind.views import KindViews
from gpufabric.domain.tenancy import Tenancy as Tenancy

D = TypeVar("D")  # a fabric's desired slice
S = TypeVar("S")  # a fabric's observed slice


class FabricKind(
    KindConfig,
    KindInventory,
    KindTerms,
    KindSegments,
    KindBackend[S],
    KindPlan[D, S],
    KindAudit[D, S],
    KindViews,
    KindSlots,
    Generic[D, S],
):
    """The pure side of one fabric kind: every facet of :mod:`gpufabric.domain.kind`. Objects are
    stateless but for the instance they are bound to and its ``fabrics.yaml`` section
    (:meth:`bind`); one per configured instance per process."""
