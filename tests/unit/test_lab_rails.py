"""The lab's GPU <-> HCA affinity (lab/extras.py ``with_rails``, issue 33): HCA i of a node is GPU
module i+1's rail only when the node has as many HCAs on a subnet as GPUs; other shapes unchanged."""

from __future__ import annotations

from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.lab.extras import with_rails


def hcas(devices: list[str], instance: str = "") -> tuple[IbPort, ...]:
    return tuple(IbPort("gpu-a01", d, 1, Guid(0x100 + 2 * k + (0x1000 if instance else 0) + 1),
                        Guid(0x100 + 2 * k + (0x1000 if instance else 0)), instance=instance)
                 for k, d in enumerate(devices))  # fmt: skip


def test_eight_hcas_eight_gpus_by_device_number() -> None:
    ports = hcas([f"mlx5_{i}" for i in (10, 2, 0, 1, 3, 4, 5, 6)])  # mlx5_10 after mlx5_6, not after mlx5_1
    got = {p.device: p.gpu for p in with_rails(ports, 8)}
    assert got == {"mlx5_0": 1, "mlx5_1": 2, "mlx5_2": 3, "mlx5_3": 4, "mlx5_4": 5, "mlx5_5": 6, "mlx5_6": 7,
                   "mlx5_10": 8}  # fmt: skip


def test_other_shapes_are_left_as_they_are() -> None:
    two = hcas(["mlx5_0", "mlx5_1"])
    assert with_rails(two, 8) == two
    eight = hcas([f"mlx5_{i}" for i in range(8)])
    assert with_rails(eight, 0) == eight
    storage = hcas(["mlx5_8"], "ib-storage")
    got = with_rails((*eight, *storage), 8)
    assert [p.gpu for p in got] == [*range(1, 9), None]  # the storage subnet's single HCA is no rail
