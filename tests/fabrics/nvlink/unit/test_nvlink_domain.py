"""NET02-02 (issue 31): a node's NVLink domain. The pure reading of ``nvidia-smi -q``'s Fabric
section (ClusterUUID and CliqueId; an HGX board is its own domain), of pdsh output, the GPU
entries that record it (bad input: one error naming the field and its range), the NVLink kind's
node view and cell, and ``inventory import --format nvidia-smi`` (the known nodes' GPUs get the
domain their hosts report; unknown hosts skipped or, ``--strict``, refused)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.hooks import ImportRequest
from gpufabric.domain.models import Node, NodeState
from gpufabric.domain.values import ModuleId
from gpufabric.fabrics.nvlink.entries import Gpu, gpu_ports, node_gpus, parse_gpus
from gpufabric.fabrics.nvlink.inventory import read
from gpufabric.fabrics.nvlink.kind import NvlinkKind
from gpufabric.fabrics.nvlink.readers.smi import parse_pdsh, pdsh_text, smi_domain
from gpufabric.lab.fmpm_standin import init_state, render_smi_q

UUID = "5f3c1a2e-0b7d-4c1e-9a8f-2d6e4b7c9a10"
KIND = NvlinkKind()


def smi(tmp_path: Path, cluster: str = "00000000-0000-0000-0000-000000000000", clique: str = "0", node: str = "n") -> str:
    """The stand-in's ``nvidia-smi -q`` of an HGX H100 board whose GPUs report ``cluster``/``clique``."""
    state = init_state(tmp_path / f"{node}.fm", node=node)
    for g in state["gpus"].values():
        g["clusterUuid"], g["cliqueId"] = cluster, clique
    return render_smi_q(state)


def node(name: str, **domain: object) -> Node:
    gpus = [Gpu(name, ModuleId(m)) for m in range(1, 9)]
    if domain:
        return Node(name, fabric_ports=(KIND.stored(tuple(parse_gpus(name, [{"module_id": g.module_id.value, **domain}
                                                                              for g in gpus], "x"))),))  # fmt: skip
    return Node(name, fabric_ports=gpu_ports(*gpus))


# ---------------------------------------------------------------- parsing
def test_a_multi_node_domain_is_read_from_every_gpus_fabric_section(tmp_path: Path) -> None:
    d = smi_domain("gpu-a01", smi(tmp_path, UUID.upper(), "32766"))
    assert d.to_dict() == {"id": f"{UUID}/32766", "cluster_uuid": UUID, "clique_id": 32766, "source": "nvidia-smi"}


def test_an_hgx_board_is_its_own_domain_named_after_the_node(tmp_path: Path) -> None:
    for cluster, clique in (("00000000-0000-0000-0000-000000000000", "0"), ("N/A", "N/A")):
        d = smi_domain("gpu-a01", smi(tmp_path, cluster, clique))
        assert (d.id, d.cluster_uuid, d.clique_id, d.source) == ("board:gpu-a01", "", None, "board")


def test_gpus_of_one_node_in_two_domains_are_refused_naming_them(tmp_path: Path) -> None:
    text = smi(tmp_path, UUID, "1")
    half = text.replace(f"ClusterUUID                       : {UUID}", "ClusterUUID                       : N/A", 1)
    with pytest.raises(ValidationError) as e:
        smi_domain("gpu-a01", half)
    assert e.value.field == "nvidia-smi -q of gpu-a01: Fabric" and "every GPU of a node in one NVLink domain" in str(e.value)
    assert "00000000:19:00.0: none" in str(e.value)


@pytest.mark.parametrize(
    ("cluster", "clique", "field", "allowed"),
    [
        ("5f3c1a2e-0b7d", "1", "ClusterUUID", "a UUID"),
        (UUID, "4294967296", "CliqueId", "0-4294967295"),
        (UUID, "N/A", "CliqueId", "0-4294967295"),
        ("N/A", "-1", "CliqueId", "0-4294967295"),
        (UUID, "\u00b2", "CliqueId", "0-4294967295"),  # a digit to str.isdigit(), not to int()
    ],
)
def test_a_bad_fabric_value_is_one_error_naming_the_field_and_range(
    tmp_path: Path, cluster: str, clique: str, field: str, allowed: str
) -> None:
    with pytest.raises(ValidationError) as e:
        smi_domain("gpu-a01", smi(tmp_path, cluster, clique))
    assert e.value.field == f"nvidia-smi -q of gpu-a01: GPU 00000000:19:00.0.{field}" and allowed in str(e.value.allowed)


def test_grepped_lines_pair_in_order_and_a_missing_one_is_refused() -> None:
    lines = f"        CliqueId : 7\n        ClusterUUID : {UUID}\n" * 4
    assert smi_domain("n", lines).id == f"{UUID}/7"
    with pytest.raises(ValidationError, match="one CliqueId and one ClusterUUID line per GPU"):
        smi_domain("n", lines + "        CliqueId : 7\n")
    with pytest.raises(ValidationError, match="CliqueId/ClusterUUID lines"):
        smi_domain("n", "No devices were found\n")


def test_pdsh_output_groups_lines_by_host_and_refuses_a_line_without_one(tmp_path: Path) -> None:
    a, b = smi(tmp_path, UUID, "3", "a"), smi(tmp_path, node="b")
    per_host = parse_pdsh(pdsh_text([("gpu-a01", a), ("gpu-a02", b)]))
    assert list(per_host) == ["gpu-a01", "gpu-a02"]
    assert [smi_domain(h, t).id for h, t in per_host.items()] == [f"{UUID}/3", "board:gpu-a02"]
    with pytest.raises(ValidationError) as e:
        parse_pdsh("gpu-a01: GPU 00000000:19:00.0\n    Fabric\n")
    assert e.value.field == "line 2"


# ---------------------------------------------------------------- the inventory entries
@pytest.mark.parametrize(
    ("entry", "field", "allowed"),
    [
        ({"cluster_uuid": UUID}, "clique_id", "0-4294967295"),
        ({"cluster_uuid": UUID, "clique_id": 1 << 32}, "clique_id", "0-4294967295"),
        ({"cluster_uuid": UUID, "clique_id": True}, "clique_id", "0-4294967295"),
        ({"clique_id": 3}, "cluster_uuid", "a UUID"),
        ({"cluster_uuid": "not-a-uuid", "clique_id": 3}, "cluster_uuid", "a UUID"),
        ({"cluster_uuid": "00000000-0000-0000-0000-000000000000", "clique_id": 0}, "cluster_uuid", "other than the all-zero"),
    ],
)
def test_a_bad_domain_in_an_inventory_entry_names_the_field(entry: dict[str, object], field: str, allowed: str) -> None:
    with pytest.raises(ValidationError) as e:
        parse_gpus("gpu-a01", [{"module_id": 1, **entry}], "nodes[0].gpus")
    assert e.value.field == f"nodes[0].gpus[0].{field}" and allowed in str(e.value.allowed)


def test_the_gpus_of_a_node_in_two_domains_are_refused() -> None:
    raw = [{"module_id": 1, "cluster_uuid": UUID, "clique_id": 1}, {"module_id": 2}]
    with pytest.raises(ValidationError) as e:
        parse_gpus("gpu-a01", raw, "nodes[0].gpus")
    assert e.value.field == "nodes[0].gpus[].cluster_uuid" and "module 2: none" in str(e.value)


def test_the_domain_round_trips_through_the_stored_entries() -> None:
    n = node("gpu-a01", cluster_uuid=UUID.upper(), clique_id=9)
    assert {(g.cluster_uuid, g.clique_id) for g in node_gpus(n)} == {(UUID, 9)}
    assert n.ports_on("nvlink") is not None and f'"cluster_uuid":"{UUID}"' in n.ports_on("nvlink").data  # type: ignore[union-attr]


# ---------------------------------------------------------------- the node view and cell
def test_the_node_view_shows_the_reported_domain_or_the_board() -> None:
    rack = KIND.node_view(node("gpu-a01", cluster_uuid=UUID, clique_id=9))
    assert rack["nvlink_domain"] == {"id": f"{UUID}/9", "cluster_uuid": UUID, "clique_id": 9, "source": "nvidia-smi"}
    board = KIND.node_view(node("gpu-a02"))
    assert board["nvlink_domain"] == {"id": "board:gpu-a02", "cluster_uuid": None, "clique_id": None, "source": "board"}
    assert KIND.node_view(Node("cpu-01"))["nvlink_domain"] is None
    assert KIND.summary(node("gpu-a01", cluster_uuid=UUID, clique_id=9)) == f"8 GPUs\nNVLink domain {UUID}/9"
    assert KIND.summary(node("gpu-a02")) == "8 GPUs"


# ---------------------------------------------------------------- inventory import --format nvidia-smi
def test_the_import_records_each_hosts_domain_on_its_known_node(tmp_path: Path) -> None:
    known = [node("gpu-a01"), node("gpu-a02", cluster_uuid=UUID, clique_id=1), Node("cpu-01")]
    text = pdsh_text([("gpu-a01", smi(tmp_path, UUID, "2", "a")), ("gpu-a02", smi(tmp_path, node="b")),
                      ("cpu-01", smi(tmp_path, node="c")), ("gpu-zz", smi(tmp_path, node="d"))])  # fmt: skip
    rep = read(ImportRequest(text, lambda: known))
    got = {n.name: KIND.node_view(n)["nvlink_domain"]["id"] for n in rep.inventory.nodes}
    assert got == {"gpu-a01": f"{UUID}/2", "gpu-a02": "board:gpu-a02"}
    assert [(e.label, e.skip) for e in rep.entries if not e.matched] == [("host cpu-01", "no-gpus"), ("host gpu-zz", "unknown")]
    assert rep.lines == (f"gpu-a01: NVLink domain board:gpu-a01 -> {UUID}/2", f"gpu-a02: NVLink domain {UUID}/1 -> board:gpu-a02")
    with pytest.raises(ValidationError) as e:
        read(ImportRequest(text, lambda: known, strict=True))
    assert e.value.field == "host" and e.value.value == "cpu-01"


def test_a_leased_nodes_domain_is_not_taken_from_its_tenant_and_an_unchanged_one_not_written(tmp_path: Path) -> None:
    leased = dataclasses.replace(node("gpu-a01"), state=NodeState.LEASED)
    same = dataclasses.replace(node("gpu-a02", cluster_uuid=UUID, clique_id=2), state=NodeState.LEASED)
    text = pdsh_text([("gpu-a01", smi(tmp_path, UUID, "2", "a")), ("gpu-a02", smi(tmp_path, UUID, "2", "b"))])
    rep = read(ImportRequest(text, lambda: [leased, same]))
    assert rep.inventory.nodes == ()  # nothing to write
    assert [(e.label, e.skip) for e in rep.entries] == [("host gpu-a01", "leased"), ("host gpu-a02", "")]
    assert rep.lines == (f"gpu-a01: skipped: node gpu-a01 is leased: its NVLink domain (board:gpu-a01) is recorded only "
                         f"while it is in quarantine, not from what its tenant's nvidia-smi says ({UUID}/2)",)  # fmt: skip


def test_a_bad_value_refuses_the_whole_import_before_the_store_is_read(tmp_path: Path) -> None:
    text = pdsh_text([("gpu-a01", smi(tmp_path, UUID, "2", "a")), ("gpu-a02", smi(tmp_path, UUID, "x", "b"))])

    def known() -> list[Node]:
        raise AssertionError("the store is not read for a refused text")

    with pytest.raises(ValidationError) as e:
        read(ImportRequest(text, known))
    assert e.value.field == "nvidia-smi -q of gpu-a02: GPU 00000000:19:00.0.CliqueId"
    with pytest.raises(ValidationError) as e:
        read(ImportRequest(text, known, instance="nvl-x"))
    assert e.value.field == "--fabric"
