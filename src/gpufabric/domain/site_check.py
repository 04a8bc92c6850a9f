"""Preflight findings of ``gpufabric site check``: one :class:`SiteCheck` per thing checked
(a device reachable, a trusted SM answering, a pool disjoint from what a fabric already
holds...), each with an id, a level, a message and the subject it is about; and the
:class:`SiteContext` a fabric backend checks against. Pure values."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gpufabric.domain.models import Network, Node


class CheckLevel(enum.StrEnum):
    OK = "ok"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _RANK[self]

    @property
    def exit_code(self) -> int:
        """The exit code of ``site check`` whose worst finding has this level (2 is left to a
        command that could not run at all, like every other command's one-line error)."""
        return _EXIT[self]


_RANK: Final[Mapping[CheckLevel, int]] = {CheckLevel.OK: 0, CheckLevel.WARNING: 1, CheckLevel.ERROR: 2, CheckLevel.CRITICAL: 3}
_EXIT: Final[Mapping[CheckLevel, int]] = {CheckLevel.OK: 0, CheckLevel.WARNING: 1, CheckLevel.ERROR: 3, CheckLevel.CRITICAL: 4}


@dataclass(frozen=True)
class SiteCheck:
    """One finding: ``id`` (e.g. ``IB-TRUSTED-SM``), ``level``, a one-line ``message`` naming
    the configuration key where one is at fault, and ``subject`` (the device, port or key)."""

    id: str
    level: CheckLevel
    message: str
    subject: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "severity": self.level.value, "message": self.message, "subject": self.subject}


def worst(checks: Iterable[SiteCheck]) -> CheckLevel:
    return max((c.level for c in checks), key=lambda lv: lv.rank, default=CheckLevel.OK)


@dataclass(frozen=True)
class SiteContext:
    """What a fabric backend checks its devices against: the inventory (``nodes``, as in the
    store), gpufabric's own ``networks`` (the segments it wrote), the segment pools
    (``segments``, a ``SegmentConfig``) and the deployment ``settings``."""

    nodes: tuple[Node, ...] = ()
    networks: tuple[Network, ...] = ()
    segments: Any = None
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def node_names(self) -> frozenset[str]:
        return frozenset(n.name for n in self.nodes)


def device_check(check_id: str, subject: str, read: Callable[[], Any], what: str) -> SiteCheck:
    """One device read with its configured driver: ok (``what`` answers), or the error the
    driver raised (a refused certificate, a timeout, a refused login), as an error finding."""
    try:
        read()
    except Exception as e:
        msg = getattr(e, "message", None) or str(e) or type(e).__name__
        return SiteCheck(check_id, CheckLevel.ERROR, f"{what}: {msg}", subject)
    return SiteCheck(check_id, CheckLevel.OK, f"{what} answers", subject)


def transport_checks(check_id: str, where: str, backend: object) -> list[SiteCheck]:
    """A warning per transport its driver runs below the secure default (``transport_notes()``)."""
    notes: Any = getattr(backend, "transport_notes", None)
    return [
        SiteCheck(check_id, CheckLevel.WARNING, f"{where} options.{n.setting}: {n.message}", n.device)
        for n in (notes() if callable(notes) else ())
    ]
