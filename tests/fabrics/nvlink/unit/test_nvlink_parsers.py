"""Parsers of fmpm and nvidia-smi output (recorded shapes in tests/fixtures/fmpm and
tests/fixtures/nvidia-smi), FM return codes, and the stand-in's output parsing back."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.fabrics.nvlink.readers.fmpm import (
    norm_bus,
    parse_failed_devices,
    parse_failure,
    parse_partition_list,
    parse_unsupported,
)
from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.fabrics.nvlink.readers.smi import parse_nvlink_status, parse_smi_q
from gpufabric.fabrics.nvlink.segments import table
from gpufabric.lab import fmpm_standin as standin

FIX = Path(__file__).parents[3] / "fixtures"


def fx(path: str) -> str:
    return (FIX / path).read_text()


def test_list_idle_is_the_hgx_table_with_nothing_active() -> None:
    fm = parse_partition_list(fx("fmpm/list-hgx-h100-idle.json"), "gpu-a01")
    assert fm.node == "gpu-a01"
    assert fm.partitions == table("hgx-h100-8gpu")
    assert fm.active == frozenset()
    assert [g.module_id for g in fm.gpus] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_list_active_partitions_and_module_id_to_pci_map() -> None:
    fm = parse_partition_list(fx("fmpm/list-hgx-h100-active-1-5.json"), "gpu-a01")
    assert fm.active == frozenset({1, 5})
    assert [p.id for p in fm.active_partitions()] == [1, 5]
    buses = {g.module_id: g.pci_bus_id[9:11] for g in fm.gpus}
    # the real box: bus 19->2, 3B->4, 4C->1, 5D->3, 9B->7, BB->5, CB->6, DB->8 (not PCI order)
    assert buses == {2: "19", 4: "3B", 1: "4C", 3: "5D", 7: "9B", 5: "BB", 6: "CB", 8: "DB"}
    assert all(g.links_max == 18 and g.links_available == 18 for g in fm.gpus)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json", "fmpm -l"),
        ('{"numPartitions": 2, "partitionInfo": []}', "fmpm -l.numPartitions"),
        ('{"numPartitions": 1, "partitionInfo": [{"partitionId": 64, "gpuInfo": []}]}', "fmpm -l.partitionInfo[0].partitionId"),
        (
            '{"partitionInfo": [{"partitionId": 1, "numGpus": 2, "gpuInfo": [{"physicalId": 1}]}]}',
            "fmpm -l.partitionInfo[0].numGpus",
        ),
        ('{"partitionInfo": [{"partitionId": 1, "gpuInfo": [{"physicalId": 0}]}]}', "module_id"),
    ],
    ids=["not-json", "count-mismatch", "id-out-of-range", "numgpus-mismatch", "bad-physical-id"],
)
def test_list_refuses_malformed_output_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(ValidationError) as e:
        parse_partition_list(text, "n")
    assert e.value.field == field


def test_unsupported_partitions() -> None:
    assert parse_unsupported(fx("fmpm/unsupported-none.json")) == ()
    ids = [(p.id, sorted(p.gpus)) for p in parse_unsupported(fx("fmpm/unsupported-gpu1-missing.json"))]
    assert ids == [(0, [1, 2, 3, 4, 5, 6, 7, 8]), (1, [1, 2, 3, 4]), (3, [1, 3]), (7, [1])]


def test_failed_devices() -> None:
    assert parse_failed_devices(fx("fmpm/failed-devices-none.json")) == ()
    gpu, switch = parse_failed_devices(fx("fmpm/failed-devices-gpu3-switch.json"))
    assert (gpu.kind, gpu.pci_bus_id, gpu.ports) == ("gpu", "00000000:5D:00.0", (4, 5))
    assert (switch.kind, switch.ports) == ("switch", (32,))


@pytest.mark.parametrize(
    ("fixture", "rc", "code", "name"),
    [
        ("activate-in-use.txt", 249, -7, "FM_ST_IN_USE"),
        ("deactivate-inactive.txt", 252, -4, "FM_ST_UNINITIALIZED"),
        ("set-activated-badparam.txt", 255, -1, "FM_ST_BADPARAM"),
        ("connect-failed.txt", 247, -9, "FM_ST_CONNECTION_NOT_VALID"),
    ],
    ids=["in-use", "inactive", "badparam", "connect"],
)
def test_failures_carry_fm_return_codes(fixture: str, rc: int, code: int, name: str) -> None:
    f = parse_failure(fx(f"fmpm/{fixture}"), rc)
    assert (f.code, f.name) == (code, name)
    assert FmReturn(code).label in f.describe()


@pytest.mark.parametrize(
    ("code", "label"),
    [(0, "success"), (-1, "bad parameter"), (-2, "generic error"), (-3, "not supported"), (-4, "uninitialized"),
     (-5, "timeout"), (-6, "version mismatch"), (-7, "in use"), (-8, "not configured"),
     (-9, "connection not valid"), (-10, "NVLink error")],
    ids=lambda v: str(v),
)
def test_every_fm_return_code_has_a_name(code: int, label: str) -> None:
    assert FmReturn(code).label.startswith(label)


def test_unknown_code_is_kept() -> None:
    assert parse_failure("", 1).code == 1
    assert parse_failure("whatever fmReturn: -42", 214).name == "fmReturn -42"


def test_smi_q_module_ids_buses_and_fabric_section() -> None:
    gpus = parse_smi_q(fx("nvidia-smi/q-hgx-h100-gpu7-in-progress.txt"))
    assert [(g.pci_bus_id[9:11], g.module_id) for g in gpus] == [
        ("19", 2), ("3B", 4), ("4C", 1), ("5D", 3), ("9B", 7), ("BB", 5), ("CB", 6), ("DB", 8)
    ]
    states = {g.module_id: (g.state, g.status) for g in gpus}
    assert states[7] == ("In Progress", "N/A")
    assert all(states[m] == ("Completed", "Success") for m in (1, 2, 3, 4, 5, 6, 8))
    assert gpus[0].clique_id == "0" and gpus[0].cluster_uuid.startswith("00000000-")


def test_smi_q_module_id_spelling_and_missing() -> None:
    text = "GPU 0000:19:00.0\n    Platform Info\n        Module Id : 3\nGPU 0000:3b:00.0\n    Module ID : N/A\n"
    a, b = parse_smi_q(text)
    assert (a.pci_bus_id, a.module_id) == ("00000000:19:00.0", 3)
    assert (b.pci_bus_id, b.module_id) == ("00000000:3B:00.0", None)
    with pytest.raises(ValidationError):
        parse_smi_q("no gpus here")


def test_nvlink_status() -> None:
    a, b = parse_nvlink_status(fx("nvidia-smi/nvlink-s-two-gpus.txt"))
    assert (a.index, len(a.links), a.active_links) == (0, 18, 18)
    assert b.active_links == 16 and dict(b.links)[4] is None and dict(b.links)[0] == pytest.approx(26.562)
    with pytest.raises(ValidationError):
        parse_nvlink_status("GPU 0: X (UUID: GPU-1)\n\t Link 0: broken\n")


def test_norm_bus() -> None:
    assert norm_bus("0000:3b:00.0") == norm_bus("00000000:3B:00.0") == "00000000:3B:00.0"


def test_standin_outputs_parse_with_the_parsers(tmp_path: Path) -> None:
    """Contract: what the stand-in prints is what the parsers read (fmpm's shapes)."""
    state = standin.init_state(tmp_path / "fm", node="gpu-a01")
    assert standin.activate(state, 2) is FmReturn.SUCCESS
    state["gpus"]["3"]["failedPorts"] = [1]
    state["gpus"]["6"]["state"] = "Not Started"
    fm = parse_partition_list(standin.render_list(state), "gpu-a01")
    assert fm.partitions == table("hgx-h100-8gpu") and fm.active == frozenset({2})
    assert fm.gpu(3) is not None and fm.gpu(3).links_available == 17  # type: ignore[union-attr]
    assert [d.pci_bus_id for d in parse_failed_devices(standin.render_failed(state))] == ["00000000:5D:00.0"]
    assert parse_unsupported(standin.render_unsupported(state)) == ()
    smi = {g.module_id: g.state for g in parse_smi_q(standin.render_smi_q(state))}
    assert smi[6] == "Not Started" and smi[1] == "Completed"
