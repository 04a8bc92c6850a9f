"""Offload parsers on the documented shapes (BlueField tc datapath, iproute2 JSON including its
known invalid output) and on the lab's own userspace recording; the offload report joining
flows to tenants, its alerts and its Prometheus text."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.fabrics.dpu.audit.capacity import CLI_SOURCE, Capacity, parse_capacity
from gpufabric.fabrics.dpu.audit.report import NodeOffload, metrics_text, offload_report
from gpufabric.fabrics.dpu.readers.offload import lenient_json, parse_dump_flows, parse_tc_filters
from gpufabric.fabrics.dpu.state import LogicalPort

FIX = Path(__file__).resolve().parents[3] / "fixtures"


def _read(rel: str) -> str:
    return (FIX / rel).read_text()


def test_bluefield_dump_flows_classified_by_path() -> None:
    flows = parse_dump_flows(_read("ovs-dpctl/bluefield-tc-dump-flows-m.txt"))
    assert [(f.in_port, f.path, f.bytes) for f in flows] == [
        ("pf0vf1", "hw", 177600000),
        ("genev_sys_6081", "hw", 174640000),
        ("pf0vf1", "tc", 504),
        ("pf0vf2", "datapath", 5200),
        ("p0", "datapath", 258),
    ]
    assert flows[0].out_ports == ("genev_sys_6081",) and flows[1].out_ports == ("pf0vf1",)
    assert flows[3].out_ports == () and flows[4].out_ports == ()  # ct/recirc, drop


def test_lab_userspace_recording_is_all_datapath() -> None:
    flows = parse_dump_flows(_read("ovs-dpctl/lab-userspace-geneve-dump-flows-m.txt"))
    assert len(flows) == 26
    assert {f.path for f in flows} == {"datapath"}
    pod = [f for f in flows if f.in_port == "vp-a"]
    assert pod and all(f.out_ports == ("ul0",) for f in pod)  # tnl_push(...) skipped, output port kept
    assert sum(f.bytes for f in flows if f.in_port == "genev_sys_6081") == 90 + 392


def test_dump_flows_rejects_garbage() -> None:
    with pytest.raises(ValidationError, match="dump-flows line 1"):
        parse_dump_flows("not a flow\n")


def test_partial_offload_is_datapath() -> None:
    line = "ufid:1, in_port(dpdk0),eth_type(0x0800), packets:1, bytes:60, used:0.1s, offloaded:partial, dp:ovs, actions:vhu1"
    (f,) = parse_dump_flows(line)
    assert (f.path, f.partial, f.out_ports) == ("datapath", True, ("vhu1",))


def test_tc_flower_flags_and_stats() -> None:
    fs = parse_tc_filters(_read("tc/pf0vf1-flower-ingress.json"), "pf0vf1")
    assert [(f.pref, f.skip_sw, f.skip_hw, f.in_hw, f.not_in_hw, f.in_hw_count, f.bytes) for f in fs] == [
        (2, True, False, True, False, 1, 177600000),
        (3, False, True, False, True, 0, 504),
        (4, True, False, False, True, 0, 0),
    ]
    assert [f.silent_drop for f in fs] == [False, False, True]
    assert not any(f.repaired for f in fs)


def test_tc_police_invalid_json_is_repaired() -> None:
    (f,) = parse_tc_filters(_read("tc/pf0vf2-police-invalid.json"), "pf0vf2")
    assert (f.in_hw, f.in_hw_count, f.packets, f.bytes, f.repaired) == (True, 1, 40, 5200, True)


def test_tc_bare_options_flags_read_from_text() -> None:
    fs = parse_tc_filters(_read("tc/u32-bare-options.json"), "eno1")
    assert [(f.kind, f.skip_sw, f.not_in_hw) for f in fs] == [("u32", False, False), ("u32", True, True)]
    assert fs[1].silent_drop


def test_lenient_json_gives_up_cleanly() -> None:
    with pytest.raises(ValidationError, match="tc -j output"):
        lenient_json('[{"a": 1}')


def test_empty_tc_output() -> None:
    assert parse_tc_filters("", "pf0vf1") == []


LSPS = {
    "gpu-a01.pf0vf1": LogicalPort("gpu-a01.pf0vf1", "acme", "gpu-a01", "0a:11:22:33:44:01", "pf0vf1"),
    "gpu-a01.pf0vf2": LogicalPort("gpu-a01.pf0vf2", "beta", "gpu-a01", "0a:11:22:33:44:03", "pf0vf2"),
}


def _node(owner_flows: str = "ovs-dpctl/bluefield-tc-dump-flows-m.txt", model: str = "BlueField-2") -> NodeOffload:
    return NodeOffload(
        "gpu-a01",
        model,
        tuple(parse_dump_flows(_read(owner_flows))),
        tuple(parse_tc_filters(_read("tc/pf0vf1-flower-ingress.json"), "pf0vf1")),
        {"pf0vf1": "gpu-a01.pf0vf1", "pf0vf2": "gpu-a01.pf0vf2"},
    )


def test_report_rows_per_tenant_and_path() -> None:
    r = offload_report([_node()], LSPS, {"gpu-a01": "acme"})
    rows = {row["tenant"]: row for row in r["rows"]}
    assert rows["acme"]["hw_flows"] == 2 and rows["acme"]["hw_bytes"] == 177600000 + 174640000
    assert (rows["acme"]["tc_flows"], rows["acme"]["tc_bytes"]) == (1, 504)
    assert (rows["beta"]["datapath_flows"], rows["beta"]["datapath_bytes"]) == (1, 5200)
    assert (rows["-"]["datapath_flows"], rows["-"]["datapath_bytes"]) == (1, 258)
    kinds = sorted(a["kind"] for a in r["alerts"])
    assert kinds == ["other_tenant_flows", "skip_sw_not_in_hw"]
    # no figure is built in: the model's capacity is unknown, not guessed
    assert r["tables"] == [{"node": "gpu-a01", "nic_model": "BlueField-2", "used": 2, "capacity": None,
                            "capacity_source": None, "ratio": None}]


def test_report_quarantined_node_alert() -> None:
    r = offload_report([_node()], LSPS, {"gpu-a01": "quarantine"})
    q = [a for a in r["alerts"] if a["kind"] == "quarantined_node_flows"]
    assert {(a["tenant"], a["flows"]) for a in q} == {("acme", 3), ("beta", 1)}


@pytest.mark.parametrize(("capacity", "level"), [(3, "warning"), (2, "critical"), (100, None)], ids=["warn", "full", "ok"])
def test_report_capacity_threshold(capacity: int, level: str | None) -> None:
    r = offload_report([_node(model="tiny")], LSPS, {"gpu-a01": "acme"}, {"tiny": capacity}, warn_at=0.6)
    got = [a["severity"] for a in r["alerts"] if a["kind"] == "offload_table"]
    assert got == ([level] if level else [])


def test_report_rejects_bad_threshold() -> None:
    with pytest.raises(ValidationError, match="warn_at"):
        offload_report([], {}, {}, warn_at=1.5)


def test_report_capacity_carries_its_source() -> None:
    cap = {"BlueField-2": Capacity(4, "vendor case 1234")}
    r = offload_report([_node()], LSPS, {"gpu-a01": "acme"}, cap, warn_at=0.5)
    assert r["tables"][0] == {"node": "gpu-a01", "nic_model": "BlueField-2", "used": 2, "capacity": 4,
                                   "capacity_source": "vendor case 1234", "ratio": 0.5}
    (alert,) = [a for a in r["alerts"] if a["kind"] == "offload_table"]
    assert alert["severity"] == "warning" and "vendor case 1234" in alert["message"]
    cli = offload_report([_node()], LSPS, {"gpu-a01": "acme"}, {"BlueField-2": 10})
    assert cli["tables"][0]["capacity_source"] == CLI_SOURCE


def test_unknown_capacity_has_no_series_and_no_alert() -> None:
    r = offload_report([_node()], LSPS, {"gpu-a01": "acme"}, warn_at=0.01)
    assert not [a for a in r["alerts"] if a["kind"] == "offload_table"]
    text = metrics_text(r)
    assert "gpufabric_dpu_offload_table_capacity" not in text.replace("# TYPE gpufabric_dpu_offload_table_capacity gauge", "")
    assert 'gpufabric_dpu_offload_table_used{node="gpu-a01",nic_model="BlueField-2"} 2' in text


@pytest.mark.parametrize(
    ("raw", "field"),
    [({"BF2": {"entries": 10}}, "dpu.capacity.BF2.source"), ({"BF2": {"entries": 0, "source": "x"}}, "dpu.capacity.BF2.entries"),
     ({"BF2": {"entries": 5, "source": "x", "size": 1}}, "dpu.capacity.BF2"), ([1], "dpu.capacity")],
    ids=["no-source", "zero", "unknown-key", "not-a-mapping"],
)
def test_parse_capacity_refuses(raw: object, field: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_capacity(raw)
    assert e.value.fields["field"] == field


def test_parse_capacity_reads_entries_and_source() -> None:
    assert parse_capacity({"BlueField-3": {"entries": 7, "source": " doc "}}) == {"BlueField-3": Capacity(7, "doc")}


def test_metrics_text() -> None:
    text = metrics_text(offload_report([_node()], LSPS, {"gpu-a01": "acme"}, {"BlueField-2": 1_000_000}))
    assert 'gpufabric_dpu_offload_flows{node="gpu-a01",tenant="acme",path="hw"} 2' in text
    assert 'gpufabric_dpu_offload_bytes{node="gpu-a01",tenant="acme",path="tc"} 504' in text
    assert 'gpufabric_dpu_offload_table_capacity{node="gpu-a01",nic_model="BlueField-2"} 1000000' in text
    assert 'gpufabric_dpu_offload_alerts{node="gpu-a01",kind="skip_sw_not_in_hw"} 1' in text


def test_ovnlab_recording_joined_to_its_tenant() -> None:
    """Recorded from OvnLab (gpu-a01's DPU, tenant acme, after pings to gpu-a02 over Geneve)."""
    flows = parse_dump_flows(_read("ovs-dpctl/ovnlab-gpu-a01-dump-flows-m.txt"))
    assert len(flows) == 24 and {f.path for f in flows} == {"datapath"}
    node = NodeOffload("gpu-a01", "generic", tuple(flows), (), {"pf0vf1": "gpu-a01.pf0vf1"})
    lsp = LogicalPort("gpu-a01.pf0vf1", "acme", "gpu-a01", "0a:00:00:00:00:01", "pf0vf1")
    r = offload_report([node], {lsp.name: lsp}, {"gpu-a01": "acme"})
    acme = next(x for x in r["rows"] if x["tenant"] == "acme")
    to_pod = [f for f in flows if f.out_ports == ("pf0vf1",)]
    assert acme["datapath_flows"] == 4 + len(to_pod) and acme["hw_flows"] == acme["tc_flows"] == 0
    assert acme["datapath_bytes"] == 238 + sum(f.bytes for f in to_pod)
    assert r["alerts"] == []
