"""One broken invariant at one place: what the audit reports and what fabric packages yield
from their own invariants (so it lives in the domain, which fabrics may import)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.severity import Severity

DRIFT: Final = "X-DRIFT"
"""The cross-fabric invariant every fabric kind may report on from its ``audit``: the desired
state disagrees with the fabric (a port unobserved or configured otherwise)."""


@dataclass(frozen=True)
class Violation:
    """One broken invariant at one place.

    ``device`` is the switch (Ethernet) or the HCA device, e.g. ``mlx5_0`` (InfiniBand,
    when the GUID is in the inventory); ``port`` is the switch port name (Ethernet) or
    the canonical port GUID (InfiniBand; the SM's GUID for ``IB-ROGUE-SM``).
    ``resource`` names the VLAN(s)/PKey(s) involved, e.g. ``vlan:2001`` or ``pkey:0x0a01``.
    """

    invariant: str
    severity: Severity
    message: str
    fabric: str | None = None  # a fabric instance name (a kind's name for its default instance)
    device: str = ""
    port: str = ""
    node: str = ""
    tenants: tuple[str, ...] = ()
    resource: str = ""

    def sort_key(self) -> tuple[int, str, str, str, str, str, str, str]:
        return (
            -self.severity.rank,
            self.invariant,
            str(self.fabric) if self.fabric else "",
            self.device,
            self.port,
            self.node,
            self.resource,
            self.message,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "severity": self.severity.value,
            "fabric": str(self.fabric) if self.fabric else None,
            "device": self.device,
            "port": self.port,
            "node": self.node,
            "tenants": list(self.tenants),
            "resource": self.resource,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, d: Any) -> Violation:
        """The violation ``to_dict`` wrote (e.g. read back from the API's audit)."""
        return cls(d["invariant"], Severity(d["severity"]), d["message"], d.get("fabric"), d.get("device", ""),
                   d.get("port", ""), d.get("node", ""), tuple(d.get("tenants") or ()), d.get("resource", ""))  # fmt: skip
