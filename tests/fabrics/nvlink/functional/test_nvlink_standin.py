"""The fmpm driver against the stand-in fmpm through real subprocesses: observe, apply with
removals first and verified read-back, idempotency (-7/-4), FM's refusals (-7 overlap, -1
unknown, -9 no FM), replay after an FM restart, failed NVLinks and nvidia-smi health.
(Real Fabric Manager cannot run here; the stand-in speaks fmpm's command line and output.)"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import Lease, Node
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.backend import FmpmDriver
from gpufabric.fabrics.nvlink.drivers.fmpm.driver import FmpmError
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports
from gpufabric.fabrics.nvlink.kind import NvlinkKind
from gpufabric.fabrics.nvlink.plan import NvlinkPlan, PartitionChange

STANDIN = [sys.executable, "-m", "gpufabric.lab.fmpm_standin"]
KIND = NvlinkKind()
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def fm(sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STANDIN, "--unix-domain-socket", str(sock), *args], capture_output=True, text=True, check=False)


@pytest.fixture
def socks(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for n in ("gpu-a01", "gpu-a02"):
        out[n] = tmp_path / f"{n}.fm"
        assert fm(out[n], "--standin-init", "hgx-h100-8gpu").returncode == 0
    return out


@pytest.fixture
def driver(socks: dict[str, Path]) -> FmpmDriver:
    return FmpmDriver(fm={n: f"unix:{p}" for n, p in socks.items()}, fmpm=STANDIN)


def tenancy(**owners: tuple[str, int | None] | None) -> Tenancy:
    nodes = tuple(Node(n, fabric_ports=gpu_ports(*(Gpu(n, ModuleId(m)) for m in range(1, 9)))) for n in owners)
    leases = {n: (Lease(o[0], n, T0, terms=(("gpus", o[1]),)) if o else None) for n, o in owners.items()}
    return Tenancy(nodes=nodes, owners=leases, networks={})


def active(d: FmpmDriver) -> dict[str, list[int]]:
    return {n: sorted(f.active) for n, f in d.observe().nodes.items()}


def test_lease_then_move_deactivates_before_activating(driver: FmpmDriver) -> None:
    assert active(driver) == {"gpu-a01": [], "gpu-a02": []}
    t = tenancy(**{"gpu-a01": ("alpha", 2), "gpu-a02": ("alpha", None)})
    back = driver.apply(KIND.diff(KIND.desired(t), driver.observe()))
    assert {n: sorted(f.active) for n, f in back.nodes.items()} == {"gpu-a01": [3], "gpu-a02": [0]}
    assert active(driver) == {"gpu-a01": [3], "gpu-a02": [0]}
    assert KIND.diff(KIND.desired(t), driver.observe()).empty

    moved = tenancy(**{"gpu-a01": ("beta", 4), "gpu-a02": ("alpha", None)})
    plan = KIND.diff(KIND.desired(moved), driver.observe())
    removals, additions = plan.split()
    after_removal = driver.apply(removals)
    assert sorted(after_removal.nodes) == ["gpu-a01"] and after_removal.nodes["gpu-a01"].active == frozenset()
    after = driver.apply(additions)
    assert after.nodes["gpu-a01"].active == frozenset({1})  # (its speed is bench/'s to measure, not a test's)


def test_idempotent_apply(driver: FmpmDriver, socks: dict[str, Path]) -> None:
    on = NvlinkPlan((PartitionChange("gpu-a01", True, 4, (2, 4)),))
    off = NvlinkPlan((PartitionChange("gpu-a01", False, 4, (2, 4)),))
    assert driver.apply(on).nodes["gpu-a01"].active == frozenset({4})
    assert fm(socks["gpu-a01"], "-a", "4").returncode == 249  # FM says -7 ...
    assert driver.apply(on).nodes["gpu-a01"].active == frozenset({4})  # ... and the driver counts it as done
    assert driver.apply(off).nodes["gpu-a01"].active == frozenset()
    assert fm(socks["gpu-a01"], "-d", "4").stdout == "Failed to deactivate partition. fmReturn: -4\n"
    assert driver.apply(off).nodes["gpu-a01"].active == frozenset()


def test_fm_refusals_are_errors_with_codes(driver: FmpmDriver, socks: dict[str, Path], tmp_path: Path) -> None:
    assert fm(socks["gpu-a01"], "-a", "1").returncode == 0  # by hand: GPUs 1-4
    with pytest.raises(FmpmError) as e:
        driver.apply(NvlinkPlan((PartitionChange("gpu-a01", True, 3, (1, 3)),)))
    assert e.value.fm_code == -7 and "in use" in e.value.message
    with pytest.raises(FmpmError) as e:
        driver.apply(NvlinkPlan((PartitionChange("gpu-a01", True, 40, ()),)))
    assert e.value.fm_code == -1 and "FM_ST_BADPARAM" in e.value.message
    gone = FmpmDriver(fm={"gpu-x": f"unix:{tmp_path / 'nofm'}"}, fmpm=STANDIN)
    with pytest.raises(FmpmError) as e:
        gone.observe()
    assert e.value.fm_code == -9 and e.value.device == "gpu-x"


def test_replay_after_fm_restart(driver: FmpmDriver, socks: dict[str, Path]) -> None:
    driver.apply(NvlinkPlan((PartitionChange("gpu-a01", True, 5, (5, 7)), PartitionChange("gpu-a01", True, 4, (2, 4)))))
    assert fm(socks["gpu-a01"], "--standin-restart").returncode == 0
    assert active(driver)["gpu-a01"] == []  # a restarted FM no longer knows
    fresh = FmpmDriver(fm={"gpu-a01": f"unix:{socks['gpu-a01']}"}, fmpm=STANDIN)
    assert fresh.replay("gpu-a01", [4, 5]).active == frozenset({4, 5})
    assert fm(socks["gpu-a01"], "--standin-restart").returncode == 0
    assert fresh.replay("gpu-a01").active == frozenset({4, 5})  # the last set it verified
    bad = fm(socks["gpu-a01"], "--set-activated-list", "1,3")
    assert (bad.returncode, bad.stdout) == (249, "Failed to set activated partitions. fmReturn: -7\n")


def test_health_from_failed_links_and_nvidia_smi(socks: dict[str, Path]) -> None:
    sock = socks["gpu-a01"]
    d = FmpmDriver(
        fm={"gpu-a01": f"unix:{sock}"},
        fmpm=STANDIN,
        smi={"gpu-a01": [*STANDIN, "--unix-domain-socket", str(sock), "--standin-nvidia-smi-q"]},
    )
    assert d.observe().nodes["gpu-a01"].unhealthy() == frozenset()
    assert fm(sock, "--standin-fail-links", "3", "4,5").returncode == 0
    assert fm(sock, "--standin-set-fabric", "6", "In Progress", "N/A").returncode == 0
    node = d.observe().nodes["gpu-a01"]
    assert node.unhealthy() == frozenset({3, 6})
    assert [(x.kind, x.pci_bus_id, x.ports) for x in d.failed_devices("gpu-a01")] == [("gpu", "00000000:5D:00.0", (4, 5))]
    t = tenancy(**{"gpu-a01": ("alpha", 2)})
    plan = KIND.diff(KIND.desired(t), d.observe())
    assert plan.lines() == ["nvlink gpu-a01: activate partition 4 (GPUs 2,4) for alpha"]
    back = d.apply(plan)
    assert back.nodes["gpu-a01"].unhealthy() == frozenset({3, 6})  # read-back keeps the health it knew


def test_hostname_addresses_use_the_standin_dir(tmp_path: Path) -> None:
    env = {"GPUFABRIC_FMPM_STANDIN_DIR": str(tmp_path)}
    init = subprocess.run(
        [*STANDIN, "--hostname", "10.0.0.7", "--standin-init", "hgx-h200-8gpu"],
        capture_output=True, text=True, check=False, env={**__import__("os").environ, **env},
    )
    assert init.returncode == 0 and (tmp_path / "10.0.0.7.json").exists()
    d = FmpmDriver(fm={"gpu-b01": "tcp:10.0.0.7:6666"}, fmpm=STANDIN, env=env)
    assert d.apply(NvlinkPlan((PartitionChange("gpu-b01", True, 0, tuple(range(1, 9))),))).nodes["gpu-b01"].active == {0}


def test_audit_reports_a_partition_activated_by_hand(driver: FmpmDriver, socks: dict[str, Path]) -> None:
    t = tenancy(**{"gpu-a01": ("alpha", 2), "gpu-a02": None})
    driver.apply(KIND.diff(KIND.desired(t), driver.observe()))
    assert list(KIND.audit(t, KIND.desired(t), driver.observe())) == []
    assert fm(socks["gpu-a01"], "-a", "2").returncode == 0  # GPUs 5-8 of a node leased for 2
    assert fm(socks["gpu-a02"], "-a", "12").returncode == 0  # GPU 6 of a quarantined node
    got = sorted((v.invariant, v.node, v.resource) for v in KIND.audit(t, KIND.desired(t), driver.observe()))
    assert got == [
        ("NVLINK-PARTITION-SHARED", "gpu-a01", "partition:2"),
        ("NVLINK-PARTITION-SHARED", "gpu-a02", "partition:12"),
    ]


def test_lab_section_builds_a_working_backend(tmp_path: Path) -> None:
    from gpufabric.lab import fmpm_standin as standin

    section = standin.lab_section(["gpu-c01", "gpu-c02"], tmp_path / "fm")
    backend = KIND.build(section, {"fmpm": FmpmDriver}.__getitem__, {})
    state = backend.observe()
    assert sorted(state.nodes) == ["gpu-c01", "gpu-c02"] and all(not n.active for n in state.nodes.values())
