"""Quotas from config.yaml: defaults, values in range, unknown keys refused naming the field."""

from __future__ import annotations

import pytest

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.quotas import Quotas


def test_defaults_and_overrides() -> None:
    assert Quotas.from_dict(None) == Quotas(networks=64, leases=256, open_moves=64)
    assert Quotas.from_dict({"networks": 2}) == Quotas(networks=2, leases=256, open_moves=64)
    assert Quotas.from_dict({"open_moves": 0}).limit("open_moves") == 0


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"network": 3}, "invalid quotas.network: 'network' (unknown quota); allowed: leases, networks, open_moves"),
        ({"leases": -1}, "invalid quotas.leases: -1; allowed: an integer 0-1000000"),
        ({"leases": "10"}, "invalid quotas.leases: '10'; allowed: an integer 0-1000000"),
        ({"open_moves": True}, "invalid quotas.open_moves: True; allowed: an integer 0-1000000"),
    ],
)
def test_bad_quotas_name_the_field_and_range(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        Quotas.from_dict(raw)
    assert e.value.message == message
