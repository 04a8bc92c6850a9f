"""Unit tests of the pure UFM plan (remove before add) and UFM response parsers."""

from __future__ import annotations

from typing import Any

import pytest

from gpufabric.domain.errors import FabricError, ValidationError
from gpufabric.domain.values import Guid, Membership, PKey
from gpufabric.fabrics.infiniband.drivers.ufm.plan import (
    REMOVE_CHUNK,
    PKeyRange,
    UfmCall,
    UfmOp,
    parse_ufm_members,
    parse_ufm_pkey,
    parse_ufm_pkey_list,
    plan_ufm,
    wire_guid,
    wire_pkey,
)
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember

F, L = Membership.FULL, Membership.LIMITED
G = [Guid(0x0002C90300000000 + i) for i in range(8)]


def part(pk: int, *members: tuple[int, Membership], ipoib: bool = False) -> Partition:
    return Partition(f"p{pk:x}", PKey(pk), tuple(PartitionMember(G[i], m) for i, m in members), ipoib)


def layout(*parts: Partition) -> PartitionLayout:
    return PartitionLayout(partitions=parts)


def calls(plan: tuple[UfmCall, ...]) -> list[str]:
    return [str(c) for c in plan]


def g(i: int) -> str:
    return wire_guid(G[i])


CASES: list[tuple[str, PartitionLayout, list[Partition], list[str]]] = [
    ("empty-to-empty", layout(), [], []),
    (
        "create-one",
        layout(part(0xA01, (0, F), (1, L))),
        [],
        ["POST /resources/pkeys full x1", "POST /resources/pkeys limited x1"],
    ),
    ("already-equal", layout(part(0xA01, (0, F), (1, F))), [part(0xA01, (1, F), (0, F))], []),
    ("delete-pkey", layout(), [part(0xA01, (0, F))], ["DELETE /resources/pkeys/0xa01"]),
    (
        "remove-one-guid",
        layout(part(0xA01, (0, F))),
        [part(0xA01, (0, F), (1, F))],
        [f"DELETE /resources/pkeys/0xa01/guids/{g(1)}"],
    ),
    (
        "move-guid-between-tenants",
        layout(part(0xA01, (0, F)), part(0xA02, (1, F), (2, F))),
        [part(0xA01, (0, F), (1, F)), part(0xA02, (2, F))],
        [f"DELETE /resources/pkeys/0xa01/guids/{g(1)}", "POST /resources/pkeys full x1"],
    ),
    (
        "membership-change-removes-then-adds",
        layout(part(0xA01, (0, L))),
        [part(0xA01, (0, F))],
        [f"DELETE /resources/pkeys/0xa01/guids/{g(0)}", "POST /resources/pkeys limited x1"],
    ),
    (
        "ipoib-change-recreates",
        layout(part(0xA01, (0, F), ipoib=True)),
        [part(0xA01, (0, F), ipoib=False)],
        ["DELETE /resources/pkeys/0xa01", "POST /resources/pkeys full x1"],
    ),
    (
        "empty-desired-partition-is-absent",
        layout(part(0xA01)),
        [part(0xA01, (0, F))],
        ["DELETE /resources/pkeys/0xa01"],
    ),
    ("empty-current-pkey-deleted", layout(), [part(0xA01)], ["DELETE /resources/pkeys/0xa01"]),
    (
        "removes-of-later-pkey-before-adds-of-earlier",
        layout(part(0xA01, (0, F), (5, F)), part(0xA09, (1, F))),
        [part(0xA01, (0, F)), part(0xA09, (1, F), (5, F))],
        [f"DELETE /resources/pkeys/0xa09/guids/{g(5)}", "POST /resources/pkeys full x1"],
    ),
]


@pytest.mark.parametrize(("desired", "current", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_plan(desired: PartitionLayout, current: list[Partition], expected: list[str]) -> None:
    plan = plan_ufm(desired, current)
    assert calls(plan) == expected
    kinds = [c.op for c in plan]
    assert kinds == sorted(kinds, key=lambda k: k is UfmOp.ADD_GUIDS)  # every removal before any add


def test_add_body_is_the_documented_one() -> None:
    (full, limited) = plan_ufm(layout(part(0xA01, (1, F), (0, F), (2, L), ipoib=True)), [], index0=True)
    assert full.request() == (
        "POST",
        "/resources/pkeys",
        {"pkey": "0xa01", "guids": [g(0), g(1)], "membership": "full", "index0": True, "ip_over_ib": True},
    )
    assert limited.request()[2] == {
        "pkey": "0xa01",
        "guids": [g(2)],
        "membership": "limited",
        "index0": True,
        "ip_over_ib": True,
    }


def test_remove_is_chunked() -> None:
    many = [Guid(0x1000 + i) for i in range(REMOVE_CHUNK + 3)]
    current = [Partition("x", PKey(0x10), tuple(PartitionMember(x) for x in many))]
    plan = plan_ufm(layout(Partition("x", PKey(0x10), (PartitionMember(many[0]),))), current)
    assert [len(c.guids) for c in plan] == [REMOVE_CHUNK, 2]
    assert all(c.op is UfmOp.REMOVE_GUIDS for c in plan)


def test_unmanaged_pkeys_are_left_alone() -> None:
    managed = PKeyRange(0xA00, 0xAFF)
    current = [part(0xB00, (0, F)), part(0xA01, (1, F))]
    assert calls(plan_ufm(layout(), current, managed)) == ["DELETE /resources/pkeys/0xa01"]


@pytest.mark.parametrize(
    "desired",
    [
        layout(part(0xB00, (0, F))),
        layout(part(0xA01, (0, F)), part(0xA01, (1, F))),
        layout(part(0xA01, (0, F), (0, L))),
    ],
    ids=["outside-managed-range", "duplicate-pkey", "duplicate-guid"],
)
def test_plan_refuses_bad_layouts(desired: PartitionLayout) -> None:
    with pytest.raises(ValidationError):
        plan_ufm(desired, [], PKeyRange(0xA00, 0xAFF))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, PKeyRange()),
        ("0x0a00-0x0aff", PKeyRange(0xA00, 0xAFF)),
        ([1, 5], PKeyRange(1, 5)),
        (["a00", "a0f"], PKeyRange(0xA00, 0xA0F)),
    ],
    ids=["default", "text", "ints", "hex-list"],
)
def test_pkey_range_parse(raw: Any, expected: PKeyRange) -> None:
    assert PKeyRange.parse(raw) == expected


@pytest.mark.parametrize(
    "raw", ["0x0a00", "0x0aff-0x0a00", "0x7fff-0x7fff", [1]], ids=["one", "reversed", "default-key", "short"]
)
def test_pkey_range_rejects(raw: Any) -> None:
    with pytest.raises(ValidationError):
        PKeyRange.parse(raw)


def test_wire_forms() -> None:
    assert wire_pkey(0xA01) == "0xa01"
    assert wire_guid(Guid(0x0002C90300000001)) == "0002c90300000001"


# --------------------------------------------------------------------------- parsers
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"0x7fff": {}, "0xa01": {}, "0x5": {}}, [0x5, 0xA01, 0x7FFF]),
        (["0xa01", "0x8a02"], [0xA01, 0xA02]),
        ([{"pkey": "0x12"}], [0x12]),
        ({}, []),
    ],
    ids=["mapping", "strings-top-bit-dropped", "objects", "empty"],
)
def test_parse_pkey_list(raw: Any, expected: list[int]) -> None:
    assert parse_ufm_pkey_list(raw) == expected


@pytest.mark.parametrize("raw", ["nope", 42, ["0xzz"]], ids=["string", "int", "bad-hex"])
def test_parse_pkey_list_rejects(raw: Any) -> None:
    with pytest.raises(FabricError):
        parse_ufm_pkey_list(raw)


def test_parse_pkey_with_guids() -> None:
    raw = {
        "partition": "api_pkey_0xa01",
        "ip_over_ib": True,
        "guids": [
            {"guid": "0002c90300000002", "membership": "limited", "index0": False},
            {"guid": "0x0002C90300000001", "membership": "full", "index0": False},
        ],
    }
    p = parse_ufm_pkey(0xA01, raw)
    assert p == Partition("api_pkey_0xa01", PKey(0xA01), (PartitionMember(G[1], F), PartitionMember(G[2], L)), True)


@pytest.mark.parametrize("raw", [{}, None], ids=["empty-object", "none"])
def test_parse_missing_pkey(raw: Any) -> None:
    assert parse_ufm_pkey(0xA01, raw) is None


@pytest.mark.parametrize(
    "raw",
    [
        [1],
        {"guids": [{"membership": "full"}]},
        {"guids": [{"guid": "xyz"}]},
        {"guids": [{"guid": G[0].value, "membership": "both"}]},
    ],
    ids=["not-object", "no-guid", "bad-guid", "bad-membership"],
)
def test_parse_pkey_rejects(raw: Any) -> None:
    with pytest.raises(FabricError):
        parse_ufm_members(0xA01, raw)
