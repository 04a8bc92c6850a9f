"""The partition tables as data: every baseboard's table is well formed, and the HGX H100/H200
8-GPU table is the Fabric Manager user guide's."""

from __future__ import annotations

import pytest

from gpufabric.domain.errors import ConfigError
from gpufabric.fabrics.nvlink.segments import MAX_GPUS, MAX_PARTITIONS, TABLES, sizes, table
from gpufabric.lab.jsoncpp import styled


@pytest.mark.parametrize("board", sorted(TABLES))
def test_table_is_well_formed(board: str) -> None:
    parts = table(board)
    assert len(parts) <= MAX_PARTITIONS
    assert len({p.id for p in parts}) == len(parts) and all(0 <= p.id < MAX_PARTITIONS for p in parts)
    assert all(1 <= g <= 64 for p in parts for g in p.gpus) and all(p.size <= MAX_GPUS for p in parts)
    for s in sizes(parts):  # partitions of one size never overlap
        same = [p for p in parts if p.size == s]
        assert sum(p.size for p in same) == len(frozenset().union(*(p.gpus for p in same)))


@pytest.mark.parametrize("board", ["hgx-h100-8gpu", "hgx-h200-8gpu"])
def test_hgx_8gpu_table(board: str) -> None:
    got = {p.id: sorted(p.gpus) for p in table(board)}
    want = {0: [1, 2, 3, 4, 5, 6, 7, 8], 1: [1, 2, 3, 4], 2: [5, 6, 7, 8], 3: [1, 3], 4: [2, 4], 5: [5, 7], 6: [6, 8]}
    want |= {7 + i: [1 + i] for i in range(8)}
    assert got == want
    assert sizes(table(board)) == (1, 2, 4, 8)


def test_unknown_board_names_the_known_ones() -> None:
    with pytest.raises(ConfigError) as e:
        table("hgx-b300")
    assert e.value.field == "nvlink.baseboard" and "hgx-h100-8gpu" in e.value.allowed


def test_styled_writer_shape() -> None:
    assert styled({"b": [1, 2], "a": {}, "c": []}) == '{\n   "a" : {},\n   "b" : [ 1, 2 ],\n   "c" : []\n}\n'
