"""The node table's fabric columns (:mod:`gpufabric.engine.columns`): one cell per registered
kind from its ``summary()``, the ``fabrics`` JSON object from its ``node_view()``, and the
80-column table (:func:`gpufabric.cli.output.node_table`) that abbreviates the cells without
wrapping a GUID."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from rich.console import Console

from gpufabric.cli import output
from gpufabric.cli.output import compact, node_table
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.models import BUILTIN_OFFERINGS, Lease, Node
from gpufabric.domain.values import Guid, ModuleId
from gpufabric.engine.columns import fabric_cells, fabric_views, registered_kinds
from gpufabric.fabrics.dpu.entries import Dpu, DpuMode, dpu_ports
from gpufabric.fabrics.ethernet.entries import EthernetPort
from gpufabric.fabrics.infiniband.entries import IbPort
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports

from support.ports import port_node

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GUIDS = ("0x0002c90310000101", "0x0002c90310000111")


def lab_node(name: str, dpu: bool = True) -> Node:
    eth = (EthernetPort(name, "eth0", "gf61559-leaf01", f"gf61559n{name[-3:]}p0", "02:d9:18:00:01:00"),)
    ib = tuple(IbPort(name, f"mlx5_{i}", 1, Guid.parse(g), Guid.parse(g[:-1] + "0")) for i, g in enumerate(GUIDS))
    gpus = gpu_ports(*(Gpu(name, ModuleId(m), f"00000000:{m:02x}:00.0") for m in range(1, 9)))
    dpus = dpu_ports(Dpu(name, "bf3", DpuMode.DPU, (("nic_model", "BlueField-3"),))) if dpu else ()
    return port_node(name, ethernet=eth, ib=ib, fabric_ports=(*dpus, *gpus))


A, B, C = lab_node("gpu-a01"), lab_node("gpu-a02"), lab_node("gpu-a03", dpu=False)
TENANCY = Tenancy(
    (A, B, C),
    {"gpu-a01": Lease("alpha", "gpu-a01", T0, offering="openshift", terms=(("gpus", 4),)), "gpu-a02": None,
     "gpu-a03": Lease("beta", "gpu-a03", T0, offering="openstack")},
    {},
    {o.name: o for o in BUILTIN_OFFERINGS},
)  # fmt: skip


def test_every_registered_kind_gives_one_cell_from_its_summary() -> None:
    kinds = registered_kinds()
    assert [k.name for k in kinds] == ["ethernet", "infiniband", "dpu", "nvlink"]
    assert fabric_cells(A, kinds, TENANCY) == [
        ("ethernet", "gf61559-leaf01/gf61559na01p0"),
        ("infiniband", f"mlx5_0/1 {GUIDS[0]}\nmlx5_1/1 {GUIDS[1]}"),
        ("dpu", "bf3 dpu-host"),  # OpenShift: OVN-Kubernetes split across host and DPU
        ("nvlink", "4/8 GPUs"),  # the lease's partition of 4 GPUs
    ]
    assert dict(fabric_cells(B, kinds, TENANCY))["nvlink"] == "0/8 GPUs"  # quarantine: no partition
    assert dict(fabric_cells(B, kinds, TENANCY))["dpu"] == "bf3 none"
    assert dict(fabric_cells(C, kinds, TENANCY)) == {**dict(fabric_cells(C, kinds, TENANCY)), "dpu": "", "nvlink": "8/8 GPUs"}


def test_fabric_views_are_the_cells_plus_each_kinds_node_view() -> None:
    v = fabric_views(A, registered_kinds(), TENANCY)
    assert list(v) == ["ethernet", "infiniband", "dpu", "nvlink"]
    assert v["ethernet"] == {"summary": "gf61559-leaf01/gf61559na01p0", "ports": [
        {"name": "eth0", "switch": "gf61559-leaf01", "switch_port": "gf61559na01p0", "mac": "02:d9:18:00:01:00"}]}
    assert [p["port_guid"] for p in v["infiniband"]["ports"]] == list(GUIDS)
    assert v["infiniband"]["ports"][0] == {"device": "mlx5_0", "port_num": 1, "port_guid": GUIDS[0],
                                           "node_guid": "0x0002c90310000100", "switch_guid": None, "switch_port": None}
    assert v["nvlink"]["partition_gpus"] == 4 and [g["module_id"] for g in v["nvlink"]["gpus"]] == list(range(1, 9))
    assert v["dpu"]["dpus"] == [{"name": "bf3", "mode": "dpu", "role": "dpu-host", "dpu_node": "gpu-a01-bf3",
                                 "nic_model": "BlueField-3", "pf": "ens1f0"}]  # fmt: skip
    assert fabric_views(C, registered_kinds(), TENANCY)["dpu"] == {"summary": "", "dpus": []}


@pytest.mark.parametrize(
    ("cell", "width", "want"),
    [
        ("", 10, "-"),
        ("8/8 GPUs", 10, "8/8 GPUs"),
        (f"mlx5_0/1 {GUIDS[0]}\nmlx5_1/1 {GUIDS[1]}", 40, f"mlx5_0/1 {GUIDS[0]} +1"),
        (f"mlx5_0/1 {GUIDS[0]}\nmlx5_1/1 {GUIDS[1]}", 18, "mlx5_0/1 …00101 +1"),
        (f"mlx5_0/1 {GUIDS[0]}\nmlx5_1/1 {GUIDS[1]}", 11, "mlx5_0/1 +1"),
        ("gf61559-leaf01/gf61559na01p0", 11, "…af01/…01p0"),
        ("leaf-1/Ethernet12", 40, "leaf-1/Ethernet12"),
    ],
)
def test_compact_keeps_whole_words_and_the_ends_of_long_ones(cell: str, width: int, want: str) -> None:
    got = compact(cell, width)
    assert got == want and len(got) <= width


def _rows(nodes: list[Node]) -> list[dict[str, object]]:
    kinds = registered_kinds()
    owners = {n: ("quarantine" if le is None else le.tenant) for n, le in TENANCY.owners.items()}
    return [{"name": n.name, "tenant": owners[n.name], "state": "available", "offering": "", "owner": None,
             "fabrics": fabric_views(n, kinds, TENANCY)} for n in nodes]  # fmt: skip


def _render(monkeypatch: pytest.MonkeyPatch, rows: list[dict[str, object]], wide: bool, width: int = 80) -> str:
    buf = io.StringIO()
    monkeypatch.setattr(output, "sized_console", lambda width: Console(file=buf, width=width, color_system=None))
    node_table(rows, wide=wide, width=width)
    return buf.getvalue()


def test_the_node_table_fits_80_columns_one_line_per_node(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _render(monkeypatch, _rows([A, B, C]), wide=False)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    head = next(ln for ln in lines if ln.startswith("node"))
    assert head.split() == ["node", "tenant", "state", "ethernet", "infiniband", "dpu", "nvlink"]
    body = [ln for ln in lines if ln.startswith("gpu-")]
    assert len(body) == 3  # one line per node: no cell wraps
    assert "bf3 dpu-host" in body[0] and "4/8 GPUs" in body[0] and "+1" in body[0]
    assert "0/8 GPUs" in body[1] and "bf3 none" in body[1]
    for ln in body:  # a GUID is shown whole or not at all (an ellipsis and its end), never split over lines
        assert all(w in GUIDS or not w.startswith("0x") for w in ln.split())


def test_wide_shows_every_port_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _render(monkeypatch, _rows([A, C]), wide=True)
    assert text.count(GUIDS[0]) == 2 and text.count(GUIDS[1]) == 2  # both HCA ports of both nodes, whole
    assert "gf61559-leaf01/gf61559na01p0" in text and "…" not in text
    assert "offering" in text.splitlines()[1]
