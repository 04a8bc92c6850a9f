"""The configuration facet of a fabric kind: the deployment-wide keys of ``fabrics.yaml`` it reads
beside its instances, and the check that its instances can run side by side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gpufabric.domain.kind.identity import KindIdentity


class KindConfig(KindIdentity):
    """What a kind reads of ``fabrics.yaml`` as a whole (each instance's own section: ``bind``)."""

    top_level: ClassVar[frozenset[str]] = frozenset()
    """The top-level keys of ``fabrics.yaml`` this kind reads: deployment-wide facts beside the
    instances (the InfiniBand kind's trusted SM GUIDs)."""

    def deployment_settings(self, fabrics_yaml: Mapping[str, Any]) -> Mapping[str, Any]:
        """The settings this kind's :attr:`top_level` keys of ``fabrics_yaml`` give every kind
        (``Tenancy.settings``, the ``settings`` a build gets); a ConfigError names a bad key.
        Default: none."""
        return {}

    def check_instances(self, sections: Mapping[str, Any], config: Any = None) -> None:
        """Refuse a set of instances of this kind that cannot run side by side (``sections``:
        instance -> its ``fabrics.yaml`` section), before any is built: raise a ConfigError
        naming the field (``fabrics.<instance>...``). ``config``: the deployment's SegmentConfig
        (as :meth:`allocate`'s; None: not known, checks against it skipped). Default: none."""
