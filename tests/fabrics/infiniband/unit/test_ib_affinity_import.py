"""``inventory import --format nvidia-smi-topo`` (fabrics/infiniband/inventory/affinity.py): the
GPU <-> HCA affinity of nodes read from real ``nvidia-smi topo -m`` outputs
(tests/fixtures/real/nvidia-smi-topo/), as pdsh prints them, set as ``gpu`` on the HCA ports
whose RDMA device is a GPU's rail (module = GPU index + 1, said in the report)."""

from __future__ import annotations

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.hooks import ImportRequest
from gpufabric.domain.models import Node, NodeState
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.entries import IbPort, all_ib_ports
from gpufabric.fabrics.infiniband.inventory.affinity import MAPPING, NAME, read
from gpufabric.fabrics.infiniband.kind import InfinibandKind

from fabrics.infiniband.unit.test_topo_matrix import SMALL
from support.ports import port_node
from support.real_outputs import manifest, real_output


def pdsh(host: str, text: str) -> str:
    return "".join(f"{host}: {line}\n" for line in text.splitlines())


def node(name: str, devices: int, state: NodeState = NodeState.AVAILABLE, gpu: int | None = None) -> Node:
    ports = tuple(IbPort(name, f"mlx5_{i}", 1, Guid(0x0002C90310000001 + 0x10 * i), Guid(0x0002C90310000000 + 0x10 * i),
                         gpu=gpu) for i in range(devices))  # fmt: skip
    return port_node(name, state=state, ib=ports)


def gpus(n: Node) -> dict[str, int | None]:
    return {p.device: p.gpu for p in all_ib_ports(n)}


def test_the_kind_offers_the_format() -> None:
    assert NAME in {f.name for f in InfinibandKind().import_formats()}


def test_real_a800_output_sets_the_rails_and_reports_gpus_without_one() -> None:
    """llm-action A800 x8 with 4 NICs: GPU1 -> mlx5_0, GPU3 -> mlx5_1, GPU7 -> mlx5_2 and mlx5_3 (PIX);
    GPUs 0, 2, 4, 5, 6 reach no NIC at PIX."""
    text = pdsh("gpu-a01", real_output(manifest("nvidia-smi-topo", "llm-action-a800x8-4nic.txt")))
    rep = read(ImportRequest(text, lambda: [node("gpu-a01", 4), node("gpu-a02", 2)]))
    (n,) = rep.inventory.nodes
    assert gpus(n) == {"mlx5_0": 2, "mlx5_1": 4, "mlx5_2": 8, "mlx5_3": 8}  # module = index + 1
    assert (
        f"gpu-a01: GPU affinity by {MAPPING}: mlx5_0/1 gpu - -> 2, mlx5_1/1 gpu - -> 4, mlx5_2/1 gpu - -> 8, "
        "mlx5_3/1 gpu - -> 8" in rep.lines
    )
    assert [ln for ln in rep.lines if "no rail HCA" in ln] == [
        f"gpu-a01: GPU{g} (module {g + 1}) has no rail HCA (no NIC at PIX)" for g in (0, 2, 4, 5, 6)
    ]
    assert rep.fields["hosts"][0]["without_rail"] == [1, 3, 5, 6, 7] and rep.fields["mapping"] == MAPPING
    again = read(ImportRequest(text, lambda: [n]))
    assert again.inventory.nodes == ()  # unchanged: nothing written


def test_real_a100_output_with_no_pix_nic_gives_no_rail() -> None:
    """xuesongtap A100 x8 with 17 NICs: the NICs sit at PXB (two GPUs per PCIe switch), none at PIX."""
    text = pdsh("gpu-a01", real_output(manifest("nvidia-smi-topo", "xuesongtap-a100x8-17nic.txt")))
    rep = read(ImportRequest(text, lambda: [node("gpu-a01", 8)]))
    assert rep.inventory.nodes == ()
    assert len([ln for ln in rep.lines if "no rail HCA" in ln]) == 8


def test_real_hgx_h100_output_gives_each_module_its_hca() -> None:
    text = pdsh("gpu-a01", real_output(manifest("nvidia-smi-topo", "sglang-30401-hgx-h100x8.txt")))
    (n,) = read(ImportRequest(text, lambda: [node("gpu-a01", 8)])).inventory.nodes
    assert gpus(n) == {f"mlx5_{i}": i + 1 for i in range(8)}


TWO_CLAIM = SMALL.replace("GPU1\tNV4\t X \tSYS", "GPU1\tNV4\t X \tPIX").replace("NIC0\tPIX\tSYS", "NIC0\tPIX\tPIX")


def test_a_nic_two_gpus_claim_goes_to_neither_and_unknown_nics_and_hosts_are_reported() -> None:
    text = pdsh("gpu-a01", TWO_CLAIM) + pdsh("gpu-zz", SMALL) + pdsh("gpu-a02", SMALL)
    rep = read(ImportRequest(text, lambda: [node("gpu-a01", 5), node("gpu-a02", 2)]))
    assert rep.inventory.nodes == ()  # a01: its only NIC is claimed twice; a02 has no mlx5_4
    assert "gpu-a01: NIC mlx5_4 is reached by GPUs GPU0, GPU1: no one GPU's rail, given to none" in rep.lines
    assert "gpu-a02: rail NIC mlx5_4 of module 1 is no HCA port of the node in the store" in rep.lines
    assert {e.label: e.skip for e in rep.entries}["host gpu-zz"] == "unknown"
    with pytest.raises(ValidationError, match="host"):
        read(ImportRequest(text, lambda: [node("gpu-a01", 5), node("gpu-a02", 2)], strict=True))


def test_a_leased_node_keeps_its_affinity_and_bad_text_refuses_everything() -> None:
    leased = node("gpu-a01", 5, NodeState.LEASED)
    rep = read(ImportRequest(pdsh("gpu-a01", SMALL), lambda: [leased]))
    assert rep.inventory.nodes == () and "changes only in quarantine" in rep.lines[-1]
    with pytest.raises(ValidationError) as err:
        read(ImportRequest(pdsh("gpu-a01", SMALL.replace("\tSYS\t8-15", "\tFOO\t8-15")), lambda: [leased]))
    assert err.value.field == "gpu-a01: nvidia-smi topo -m line 3" and "\n" not in str(err.value)
    with pytest.raises(ValidationError, match="HOST: LINE"):
        read(ImportRequest(SMALL, lambda: []))
