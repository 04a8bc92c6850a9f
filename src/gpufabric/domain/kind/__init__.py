"""The facets of the fabric seam: :class:`~gpufabric.domain.fabric.FabricKind` is composed of them,
one module per file of a kind's skeleton (``fabrics/<kind>/``) that implements it.

``identity`` (name, instance, section, bind) is the base every facet extends; ``config``
(deployment-wide keys of fabrics.yaml), ``inventory`` (a node's ports, import formats),
``terms`` (lease terms, offering settings), ``segments`` (a network's segment), ``backend``
(:class:`~gpufabric.domain.kind.backend.FabricBackend`: observe / apply, and ``build``; its site
checks: ``site_check``), ``plan`` (:class:`~gpufabric.domain.kind.plan.FabricPlan`: desired,
diff, read-back), ``audit`` (invariants, ports seen) and ``views`` (node cells, a kind's own
commands and routes, power cycles). ``gpufabric.domain.fabric`` composes them.
"""
