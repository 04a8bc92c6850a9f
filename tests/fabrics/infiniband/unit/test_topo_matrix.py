"""``nvidia-smi topo -m`` (fabrics/infiniband/readers/topo.py) held to real outputs and to bad input.

Each real output's reading is written by hand in its manifest (tests/fixtures/real/nvidia-smi-topo/):
the device columns and the NIC Legend, links read off the matrix, GPU affinities, and the rail
HCAs (the NICs at PIX from each GPU) with the GPUs that have none and the NICs two GPUs claim.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.fabrics.infiniband.readers.topo import gpu_rails, parse_topo_matrix

from support.real_outputs import Manifest, manifest, manifests, real_output

TOPO = manifests("nvidia-smi-topo")


def test_the_corpus_holds_the_board_kinds_the_reader_meets() -> None:
    files = {m.file for m in TOPO}
    assert len(TOPO) >= 8
    assert "sglang-30401-hgx-h100x8.txt" in files  # HGX H100: a NIC at PIX per GPU, NIC Legend
    assert "jdh4-traverse-v100x4-mlx5.txt" in files  # old driver: mlx5_N columns, tabs
    assert "stelline-asus-esc8000a-e12-rtx6000ada-x4.txt" in files  # PCIe only
    for m in TOPO:
        assert m.doc["license"] and m.doc["device"] and m.doc["path"], m.id


@pytest.mark.parametrize("m", TOPO, ids=[m.file for m in TOPO])
def test_real_topo_matrices_are_read_as_written_by_hand(m: Manifest) -> None:
    exp = m.expected
    topo = parse_topo_matrix(real_output(m))
    assert [g.index for g in topo.gpus] == list(range(exp["gpus"]))
    assert [[n.label, n.device] for n in topo.nics] == exp["nics"]
    for pair, link in exp["links"].items():
        a, b = pair.split("-", 1) if not pair.startswith("mlx5") else pair.rsplit("-", 1)
        assert topo.link(a, b) == link, pair
        assert topo.link(b, a) == link, pair
    for gpu, (cpus, numa, gpu_numa) in exp["affinity"].items():
        g = topo.gpus[int(gpu)]
        assert (g.cpu_affinity, g.numa_affinity, g.gpu_numa_id) == (cpus, numa, gpu_numa), gpu
    rails = gpu_rails(topo)
    assert {r.gpu: list(r.hcas) for r in rails.rails} == {int(k): v for k, v in exp["rails"].items()}
    assert list(rails.gpus_without_rail) == exp["without_rail"]
    assert {s.hca: list(s.gpus) for s in rails.shared_nics} == exp["shared"]


def test_hgx_h100_gives_each_gpu_its_own_rail_hca() -> None:
    topo = parse_topo_matrix(real_output(manifest("nvidia-smi-topo", "sglang-30401-hgx-h100x8.txt")))
    rails = gpu_rails(topo)
    assert rails.hcas_of(3) == ("mlx5_3",) and rails.hcas_of(7) == ("mlx5_7",)
    assert topo.gpu_link(0, 1) == "NV18" and topo.link("GPU5", "mlx5_5") == "PIX"
    assert rails.gpus_without_rail == () and rails.shared_nics == ()


def test_nics_reached_by_two_gpus_are_reported_not_given_to_either() -> None:
    """DGX/HGX A100: NIC pairs sit behind a PCIe switch two GPUs share (PXB): counted as rails,
    each NIC is claimed by both GPUs of the pair, which the caller turns into an error."""
    m = manifest("nvidia-smi-topo", "xuesongtap-a100x8-17nic.txt")
    rails = gpu_rails(parse_topo_matrix(real_output(m)), within=frozenset({"PIX", "PXB"}))
    shared = {s.hca: list(s.gpus) for s in rails.shared_nics}
    for hca, gpus in m.expected["pxb_shared"].items():
        assert shared[hca] == gpus
    assert len(shared) == 16 and "mlx5_bond_0" not in shared
    assert rails.hcas_of(0) == ("mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5")


def test_a_gpu_with_two_pix_nics_gets_both() -> None:
    m = manifest("nvidia-smi-topo", "llm-action-a800x8-4nic.txt")
    assert gpu_rails(parse_topo_matrix(real_output(m))).hcas_of(7) == ("mlx5_2", "mlx5_3")


SMALL = (
    "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tNV4\tPIX\t0-7\t0\n"
    "GPU1\tNV4\t X \tSYS\t8-15\t1\n"
    "NIC0\tPIX\tSYS\t X \t\t\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
    "\n"
    "NIC Legend:\n"
    "\n"
    "  NIC0: mlx5_4\n"
)


def test_a_terminal_capture_with_ansi_underline_and_crlf_reads_the_same() -> None:
    plain = parse_topo_matrix(SMALL)
    tty = parse_topo_matrix("\x1b[4m" + SMALL.replace("\n", "\r\n", 1).replace("NUMA Affinity", "NUMA Affinity\x1b[0m"))
    assert plain == tty
    assert plain.link("GPU0", "mlx5_4") == "PIX" and plain.nic("NIC0").device == "mlx5_4"
    assert gpu_rails(plain).hcas_of(0) == ("mlx5_4",) and gpu_rails(plain).gpus_without_rail == (1,)


@pytest.mark.parametrize(
    ("text", "line", "why"),
    [
        (SMALL.replace("GPU1\tNV4\t X \tSYS", "GPU1\tNV4\t X \tFOO"), 3, "link 'FOO'"),
        (SMALL.replace("GPU1\tNV4", "GPU2\tNV4"), 3, "row 'GPU2'"),
        (SMALL.replace("NIC0\tPIX\tSYS", "NIC0\tPIX\tPXB"), 4, "NIC0-GPU1 PXB but GPU1-NIC0 SYS"),
        (SMALL.replace("GPU0\t X \tNV4", "GPU0\tSYS\tNV4"), 2, "X on the diagonal"),
        (SMALL.replace("GPU1\tNV4\t X \tSYS\t8-15\t1", "GPU1\tNV4\t X"), 3, "2 cells"),
        (SMALL.replace("  NIC0: mlx5_4", "  NIC0: mlx5_4\nrandom trailer"), 14, "unexpected line"),
        ("Some banner\n" + SMALL, 1, "not the matrix header"),
        ("".join(SMALL.splitlines(keepends=True)[1:]), 1, "a matrix row, no header"),
        (SMALL.replace("\t8-15\t1", "\t8-15\t1\textra"), 3, "too many cells"),
        (SMALL.replace("\t8-15\t1", "\tnodes\t1"), 3, "CPU Affinity 'nodes'"),
    ],
)
def test_malformed_output_is_refused_naming_the_line(text: str, line: int, why: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_topo_matrix(text)
    assert err.value.field == f"nvidia-smi topo -m line {line}"
    assert why in str(err.value) and "\n" not in str(err.value)


def test_a_nic_column_the_legend_does_not_name_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"NIC Legend: 'NIC0'.*not in the NIC Legend"):
        parse_topo_matrix(SMALL.replace("  NIC0: mlx5_4\n", ""))
    with pytest.raises(ValidationError, match=r"the row of GPU1 is missing"):
        parse_topo_matrix("".join(SMALL.splitlines(keepends=True)[:2]))
    with pytest.raises(ValidationError, match="empty output"):
        parse_topo_matrix("\n \n")


def test_fixture_files_are_not_read_outside_the_corpus() -> None:
    assert all(Path(m.doc["file"]).name == m.doc["file"] for m in TOPO)
