"""Tests' handles on the drivers behind an engine's backends, by role: every switch driver of the
instances that drive switches (the Ethernet kind's ``switches``), and each instance's subnet
manager (the InfiniBand kind's ``sm``). The core has no such accessor: it reaches backends only
through the FabricKind seam."""

from __future__ import annotations

from typing import Any


def switches(fabrics: Any) -> dict[str, Any]:
    """switch name -> its driver, over every instance whose backend drives switches."""
    out: dict[str, Any] = {}
    for b in fabrics.backends.values():
        out.update(getattr(b, "switches", {}))
    return out


def sms(fabrics: Any) -> dict[str, Any]:
    """instance -> its subnet manager driver, for every instance driven through one, in order."""
    return {name: sm for name, b in fabrics.backends.items() if (sm := getattr(b, "sm", None)) is not None}


def sm_for(fabrics: Any, instance: str) -> Any:
    """The subnet manager of ``instance`` (KeyError naming it when it has none)."""
    return sms(fabrics)[instance]


def sm(fabrics: Any) -> Any:
    """The subnet manager of the first instance with one (a one-subnet site)."""
    return next(iter(sms(fabrics).values()), None)
