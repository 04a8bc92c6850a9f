"""The DPU gate's configuration (``dpu.mst``, ``dpu.drain``, ``dpu.offload``) and which moves it
applies to: secure by default (no reader: a move into a dpu-host offering is refused unless
``mst: {verify: false}`` says so explicitly); moves to other offerings and releases untouched."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpufabric.domain.errors import ConfigError, ConflictError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.moves import Move
from gpufabric.fabrics.dpu.backend.facts import facts_of
from gpufabric.fabrics.dpu.backend.lifecycle import check_gates, tolerations
from gpufabric.fabrics.dpu.entries.info import DpuInfo
from gpufabric.fabrics.dpu.kind import DpuKind
from gpufabric.fabrics.dpu.readers.dpumode import DpuFacts

from fabrics.dpu.unit.dpu_scenarios import OFFERINGS, dpu_node, tenancy
from fabrics.dpu.unit.test_dpu_config import DRIVERS, OK

NODES = [dpu_node("gpu-a01"), dpu_node("gpu-a02")]
T = tenancy(NODES, {"gpu-a01": None, "gpu-a02": ("acme", "openshift")})


class Reader:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.asked: list[str] = []

    def read(self, info: DpuInfo) -> DpuFacts:
        self.asked.append(info.host)
        return DpuFacts(info.host, self.mode, self.mode, "24.35.1012")


def test_gate_applies_only_to_moves_into_dpu_host_offerings() -> None:
    r = Reader("separated")
    check_gates(T, [Move("gpu-a01", "acme", offering="baremetal"), Move("gpu-a02", "quarantine")], r)  # type: ignore[arg-type]
    check_gates(T, [Move("gpu-a01", "acme", offering="k8s-full")], r)  # type: ignore[arg-type]
    assert r.asked == []
    with pytest.raises(ConflictError, match="gpu-a01: DPU is in separated mode"):
        check_gates(T, [Move("gpu-a01", "acme", offering="openshift")], r)  # type: ignore[arg-type]
    check_gates(T, [Move("gpu-a01", "acme", offering="openshift")], Reader("restricted"))  # type: ignore[arg-type]


def test_no_reader_refuses_unless_explicitly_off() -> None:
    with pytest.raises(ConfigError) as e:
        check_gates(T, [Move("gpu-a01", "acme", offering="openshift")], None)
    assert e.value.fields["field"] == "dpu.mst" and "verify: false" in e.value.message
    check_gates(T, [Move("gpu-a01", "acme", offering="openshift")], None, enforce=False)


def test_build_mst_drain_offload_sections() -> None:
    b: Any = DpuKind().build(OK, DRIVERS.__getitem__, {})
    assert b.mst is None and b.gate is True and b.offload == {}
    b = DpuKind().build(OK | {"mst": {"verify": False}}, DRIVERS.__getitem__, {})
    assert b.mst is None and b.gate is False
    b = DpuKind().build(OK | {"mst": {"command": ["ssh", "root@{host}"], "firmware": "mlxfwmanager"},
                              "offload": {"gpu-a01": {"appctl": "/run/ovs.ctl"}}}, DRIVERS.__getitem__, {})  # fmt: skip
    assert b.mst.command == ["ssh", "root@{host}"] and b.mst.firmware == "mlxfwmanager"
    assert b.offload == {"gpu-a01": {"appctl": "/run/ovs.ctl", "netns": ""}}


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"mst": "yes"}, "dpu.mst"),
        ({"mst": {"command": "ssh"}}, "dpu.mst.command"),
        ({"mst": {"command": [], "firmware": "mstflint"}}, "dpu.mst.firmware"),
        ({"mst": {"command": [], "colour": 1}}, "dpu.mst.colour"),
        ({"mst": {"verify": False, "command": []}}, "dpu.mst.verify"),
        ({"mst": {"verify": "no"}}, "dpu.mst.verify"),
        ({"drain": {"timeout": 0}}, "dpu.drain.timeout"),
        ({"drain": {"wait": 3}}, "dpu.drain.wait"),
        ({"offload": {"gpu-a01": {}}}, "dpu.offload.gpu-a01"),
        ({"offload": {"gpu-a01": {"appctl": "x", "ssh": "y"}}}, "dpu.offload.gpu-a01.ssh"),
    ],
)
def test_bad_sections_name_the_field(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        DpuKind().build(OK | extra, DRIVERS.__getitem__, {})
    assert e.value.fields["field"] == field


def test_tolerations_match_the_dpu_host_taint() -> None:
    assert tolerations() == [{"key": "k8s.ovn.org/dpu-host", "operator": "Exists", "effect": "NoSchedule"}]


def test_drain_of_a_node_without_pods_on_a_fresh_apiserver() -> None:
    """kmock answers 404 to a pods listing before its first pod (the lab's stand-in): nothing to
    drain, not an error (failed the lab's openshift e2e before)."""
    from gpufabric.fabrics.dpu.drivers.k8s.drain import Drainer

    from support.kmock_evict import api_of, kmock_evicting

    with kmock_evicting() as box:
        api = api_of(box.url)
        api.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a01"}})
        d = Drainer(api, timeout=1, retry_every=0.05)
        assert d.set_schedulable("gpu-a01", False) and d.is_cordoned("gpu-a01")
        r = d.drain("gpu-a01")
        assert (r.evicted, r.kept, r.refusals) == ((), (), 0)
        assert not d.set_schedulable("gpu-a99", False)  # not registered: nothing to cordon


@pytest.mark.parametrize("tool", ["flint", "mlxfwmanager"])
def test_gate_decides_on_the_running_firmware_end_to_end(tool: str, tmp_path: Path) -> None:
    """A BlueField whose new firmware is burned but not yet running (the lab's stand-in prints the
    running one as flint's ``FW Version(Running)`` / mlxfwmanager's ``FW (Running)`` row): the
    facts ``offload facts`` shows carry the running firmware and a power cycle pending, and the
    openshift gate, read through the configured reader, refuses the move although the flashed
    image meets the minimum; after the power cycle it runs that image and the move passes."""
    import sys

    from gpufabric.fabrics.dpu.drivers.host.mst import MstReader
    from gpufabric.lab.mlxstub import main, write_state

    st = tmp_path / "gpu-a01.json"
    write_state(st, mode="embedded", firmware="24.35.2000")
    assert main([str(st), "burn", "24.40.1000"]) == 0  # the lab's `flint -i fw.bin burn`
    reader = MstReader([sys.executable, "-m", "gpufabric.lab.mlxstub", str(tmp_path / "{host}.json")], firmware=tool)
    settings = dict(OFFERINGS["openshift"].settings) | {"dpu_min_firmware": "24.40.1000"}
    t = Tenancy(T.nodes, T.owners, {}, OFFERINGS | {"openshift": replace(OFFERINGS["openshift"],
                                                                         settings=tuple(settings.items()))})  # fmt: skip
    facts = facts_of(_Backend(reader), T.nodes, ["gpu-a01"])[0]
    assert (facts.firmware, facts.flashed_firmware, facts.power_cycle_pending) == ("24.35.2000", "24.40.1000", True)
    assert facts.to_dict()["firmware"] == "24.35.2000" and facts.to_dict()["flashed_firmware"] == "24.40.1000"
    with pytest.raises(ConflictError, match=r"gpu-a01: DPU power cycle pending \(firmware 24.35.2000 -> 24.40.1000\)"):
        check_gates(t, [Move("gpu-a01", "acme", offering="openshift")], reader)
    assert main([str(st), "power-cycle"]) == 0
    facts = facts_of(_Backend(reader), T.nodes, ["gpu-a01"])[0]
    assert (facts.firmware, facts.flashed_firmware, facts.power_cycle_pending) == ("24.40.1000", "24.40.1000", False)
    check_gates(t, [Move("gpu-a01", "acme", offering="openshift")], reader)
    write_state(st, mode="embedded", firmware="24.35.2000")  # running below the minimum, nothing pending
    with pytest.raises(ConflictError, match=r"DPU firmware 24.35.2000 is below 24.40.1000"):
        check_gates(t, [Move("gpu-a01", "acme", offering="openshift")], reader)


class _Backend:
    def __init__(self, mst: object) -> None:
        self.mst = mst
