"""Each fact has one source (issue 19): the places that used to repeat a fact now read it from one.

The quarantine VLAN's default lives in ``domain/segments.py`` (``DEFAULT_QUARANTINE_VLAN``); every
other module, the lab included, takes the configured value. A grep over the source (number tokens,
not prose) keeps the literal from coming back.
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpufabric.domain.segments import DEFAULT_QUARANTINE_VLAN, SegmentConfig
from gpufabric.engine.fabrics import Fabrics
from gpufabric.fabrics.ethernet.plan import settings_quarantine_vlan

SRC = Path(__file__).resolve().parents[2] / "src" / "gpufabric"

# modules where the number 4000 is something else than a VLAN (with why)
OTHER_4000 = {
    "fabrics/ethernet/ssh.py": 2,  # the tail of a failed command's output kept in the error (characters)
    "lab/netns.py": 1,  # the lab's node-count limit (host numbers stay below 4096)
}


def number_count(text: str, value: int) -> int:
    n = 0
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        if t.type == tokenize.NUMBER and t.string.isdigit() and int(t.string) == value:
            n += 1
    return n


def test_only_the_segment_config_holds_the_default_quarantine_vlan() -> None:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        n = number_count(path.read_text(), DEFAULT_QUARANTINE_VLAN)
        if n:
            found[rel] = n
    assert found == {"domain/segments.py": 1, **OTHER_4000}


def test_the_grep_sees_a_literal() -> None:
    assert number_count("QUARANTINE_VLAN = 4000\n# 4000 in prose\nx = '4000'\n", 4000) == 1


def test_every_default_is_the_config_default() -> None:
    """Without config.yaml the engine, the Ethernet kind and the lab agree on one VLAN."""
    from gpufabric.lab.lab import LabStatus
    from gpufabric.lab.netns import EthPlan, plan_ethernet

    want = SegmentConfig.default().quarantine_vlan.value
    assert want == DEFAULT_QUARANTINE_VLAN
    assert Fabrics().quarantine_vlan == want
    assert Fabrics().settings["quarantine_vlan"] == want
    assert settings_quarantine_vlan({}) == want
    assert plan_ethernet("gfabcde", ["gpu-a01"]).quarantine_vlan == want
    assert EthPlan("p", "p-spine", (), ()).quarantine_vlan == want
    assert LabStatus(home="h", running=False).quarantine_vlan == want


def test_lab_up_brings_the_lab_up_on_the_configured_quarantine_vlan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gpufabric lab up`` hands config.yaml's quarantine VLAN (and tenant pool) to the lab; it used
    to park every new port on 4000 whatever the configuration said."""
    from gpufabric.cli.lab_cmd import app
    from gpufabric.lab.lab import Lab

    (tmp_path / "config.yaml").write_text(
        "segments:\n  ethernet: {vlan_range: 2100-2199, quarantine_vlan: 4001}\n"
    )
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))
    monkeypatch.delenv("GPUFABRIC_CONFIG", raising=False)
    seen: dict[str, Any] = {}

    def fake_up(self: Lab, *args: Any, **kwargs: Any) -> None:
        seen.update(kwargs)
        raise SystemExit(7)  # stop before anything is made

    monkeypatch.setattr(Lab, "up", fake_up)
    result = CliRunner().invoke(app, ["up", "--json"])
    assert result.exit_code == 7, result.output
    assert (seen["quarantine_vlan"], seen["uplink_vlans"]) == (4001, (2100, 2199))
