"""Per-tenant quotas: how many networks, live leases and open moves one tenant may hold, so that
no role can exhaust the shared VLAN/PKey pools or the move queue for everyone else. Admins are
not counted against them (the operator). Read from ``config.yaml`` (``quotas:``). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from gpufabric.domain.errors import ConfigError

LIMIT_MAX = 1_000_000


@dataclass(frozen=True)
class Quotas:
    networks: int = 64  # networks of one tenant (each takes a VLAN and a PKey from the shared pools)
    leases: int = 256  # live leases of one tenant, offers and pending grants included
    open_moves: int = 64  # moves into one tenant not yet done

    @staticmethod
    def from_dict(raw: Mapping[str, Any] | None) -> Quotas:
        """Quotas from the ``quotas:`` section; unknown keys and values out of range are ConfigError."""
        raw = dict(raw or {})
        known = {f.name for f in fields(Quotas)}
        for key in raw:
            if key not in known:
                raise ConfigError(f"quotas.{key}", key, ", ".join(sorted(known)), "unknown quota")
        out: dict[str, int] = {}
        for key, value in raw.items():
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= LIMIT_MAX:
                raise ConfigError(f"quotas.{key}", value, f"an integer 0-{LIMIT_MAX}")
            out[key] = value
        return Quotas(**out)

    def limit(self, what: str) -> int:
        value = getattr(self, what)
        assert isinstance(value, int)
        return value
