"""Pure rogue-SM detection and OpenSM driver option parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ConfigError
from gpufabric.domain.state import IbFabricState, SmSeen, SmState
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.opensm import OpenSMConfig
from gpufabric.fabrics.infiniband.rogue import find_rogue_sms

TRUSTED = Guid(0x0002C90310000001)
ROGUE = Guid(0x0002C90310000401)


@pytest.mark.parametrize(
    ("sms", "master", "expected"),
    [
        ((SmSeen(TRUSTED, 1, 15, SmState.MASTER, "sm-01"),), TRUSTED, []),
        (
            (SmSeen(TRUSTED, 1, 15, SmState.MASTER), SmSeen(ROGUE, 7, 15, SmState.MASTER, "gpu-a04")),
            ROGUE,
            [(ROGUE, "gpu-a04", "untrusted master SM")],
        ),
        (
            (SmSeen(TRUSTED, 1, 15, SmState.MASTER), SmSeen(ROGUE, 7, 3, SmState.STANDBY)),
            TRUSTED,
            [(ROGUE, "gpu-a04", "untrusted SM")],
        ),
        ((), ROGUE, [(ROGUE, "gpu-a04", "untrusted master SM")]),
    ],
    ids=["clean", "rogue-master", "rogue-standby", "master-only-from-portinfo"],
)
def test_find_rogue_sms(sms: tuple[SmSeen, ...], master: Guid, expected: list[tuple[Guid, str, str]]) -> None:
    found = find_rogue_sms(IbFabricState(sms=sms, master_guid=master), [TRUSTED], {ROGUE: "gpu-a04"})
    assert [(f.guid, f.node, f.reason) for f in found] == expected
    for f in found:
        assert str(ROGUE) in str(f)


def test_config_from_options() -> None:
    c = OpenSMConfig.from_options(
        {
            "partitions_conf": "/etc/opensm/partitions.conf",
            "log_path": "/var/log/opensm.log",
            "systemd_unit": "opensm",
            "trusted_sm_guids": ["0x0002c90310000001"],
            "diag_env": {"SIM_HOST": "sm-01 mlx5_0"},
        }
    )
    assert c.trusted_sm_guids == (TRUSTED,)
    assert c.last_good == Path("/etc/opensm/partitions.conf.last-good")
    assert c.diag_env == (("SIM_HOST", "sm-01 mlx5_0"),)


@pytest.mark.parametrize(
    "options",
    [{"log_path": "/x"}, {"partitions_conf": "/p", "log_path": "/x", "bogus": 1}],
    ids=["missing-required", "unknown-option"],
)
def test_config_rejects(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        OpenSMConfig.from_options(options)
