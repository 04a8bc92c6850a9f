"""``gpufabric inventory import FILE --format nvidia-smi-topo`` on a store (issue 33): after the
lab fabric's ibnetdiscover import, a pdsh'd ``nvidia-smi topo -m`` sets ``gpu`` on gpu-a01's two
HCAs, kept through the store and a second ibnetdiscover import; the kind's ``check_slot`` then
judges the stored node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.cli.backends.local import Local
from gpufabric.cli.common import close_stores
from gpufabric.domain.errors import ValidationError
from gpufabric.fabrics.infiniband.entries import all_ib_ports
from gpufabric.fabrics.infiniband.inventory.affinity import import_format as topo_format
from gpufabric.fabrics.infiniband.inventory.importer import import_format
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.store.core import Store

IBNET = (Path(__file__).parents[3] / "fixtures" / "ibnetdiscover" / "lab-6x2-sm.topology.txt").read_text()
TOPO = (
    "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tNV18\tPIX\tSYS\t0-47\t0\n"
    "GPU1\tNV18\t X \tSYS\tPIX\t48-95\t1\n"
    "NIC0\tPIX\tSYS\t X \tSYS\n"
    "NIC1\tSYS\tPIX\tSYS\t X \n"
    "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"
)


@pytest.fixture
def url(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))
    monkeypatch.setenv("GPUFABRIC_DB", store_url)
    close_stores()
    Local().import_format("ibnetdiscover", import_format(), IBNET, None, False)
    yield store_url
    close_stores()


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_the_affinity_is_stored_kept_and_judged(url: str) -> None:
    text = "".join(f"gpu-a01: {line}\n" for line in TOPO.splitlines())
    doc = Local().import_format("nvidia-smi-topo", topo_format(), text, None, False)
    assert doc["result"]["updated"] == 1 and doc["mapping"].startswith("module = GPU index + 1")
    store = Store.open(url)
    assert {p.device: p.gpu for p in all_ib_ports(store.node("gpu-a01"))} == {"mlx5_0": 1, "mlx5_1": 2}
    Local().import_format("ibnetdiscover", import_format(), IBNET, None, False)  # the fabric again: gpu kept
    node = Store.open(url).node("gpu-a01")
    assert {p.device: p.gpu for p in all_ib_ports(node)} == {"mlx5_0": 1, "mlx5_1": 2}
    InfinibandKind().check_slot(node, frozenset({1, 2}))
    with pytest.raises(ValidationError, match="GPU 3 of gpu-a01 has no rail HCA"):
        InfinibandKind().check_slot(node, frozenset({3, 4}))
