"""Each fact has one source (issue 19): the places that used to repeat a fact now read it from one.

The quarantine VLAN's default lives in the Ethernet kind's section of ``segments:``
(``fabrics/ethernet/segments.py``, ``DEFAULT_QUARANTINE_VLAN``); every other module, the lab
included, takes the configured value. A grep over the source (number tokens, not prose) keeps the
literal from coming back.
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpufabric.engine.fabrics import Fabrics
from gpufabric.fabrics.ethernet.entries import ethernet_ports
from gpufabric.fabrics.ethernet.plan import settings_quarantine_vlan
from gpufabric.fabrics.ethernet.segments import DEFAULT_QUARANTINE_VLAN
from gpufabric.store.registry import parse_segments

SRC = Path(__file__).resolve().parents[2] / "src" / "gpufabric"

# modules where the number 4000 is something else than a VLAN (with why)
OTHER_4000 = {
    "fabrics/ethernet/drivers/ssh/driver.py": 2,  # the tail of a failed command's output kept in the error (characters)
    "lab/netns.py": 1,  # the lab's node-count limit (host numbers stay below 4096)
}


def number_count(text: str, value: int) -> int:
    n = 0
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        if t.type == tokenize.NUMBER and t.string.isdigit() and int(t.string) == value:
            n += 1
    return n


def test_only_the_segment_config_holds_the_default_quarantine_vlan() -> None:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        n = number_count(path.read_text(), DEFAULT_QUARANTINE_VLAN)
        if n:
            found[rel] = n
    assert found == {"fabrics/ethernet/segments.py": 1, **OTHER_4000}


def test_the_grep_sees_a_literal() -> None:
    assert number_count("QUARANTINE_VLAN = 4000\n# 4000 in prose\nx = '4000'\n", 4000) == 1


def test_every_default_is_the_config_default() -> None:
    """Without config.yaml the engine, the Ethernet kind and the lab agree on one VLAN (and one
    tenant VLAN pool): the Ethernet kind's section of ``segments:`` holds both defaults."""
    from gpufabric.lab.lab import LabStatus
    from gpufabric.lab.netns import EthPlan, lab_vlans, plan_ethernet

    cfg = parse_segments()
    want = cfg.settings()["quarantine_vlan"]
    assert want == DEFAULT_QUARANTINE_VLAN
    assert Fabrics(segments=cfg).settings["quarantine_vlan"] == want
    assert "quarantine_vlan" not in Fabrics().settings  # nothing configured: the kind's own default
    assert settings_quarantine_vlan(Fabrics().settings) == want
    assert settings_quarantine_vlan({}) == want
    assert lab_vlans(cfg) == (EthPlan("p", "p-spine", (), ()).uplink_vlans, want) == ((2000, 2999), want)
    assert plan_ethernet("gfabcde", ["gpu-a01"]).quarantine_vlan == want
    assert EthPlan("p", "p-spine", (), ()).quarantine_vlan == want
    assert LabStatus(home="h", running=False).quarantine_vlan == want


def test_lab_up_brings_the_lab_up_on_the_configured_quarantine_vlan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gpufabric lab up`` hands config.yaml's quarantine VLAN (and tenant pool) to the lab; it used
    to park every new port on 4000 whatever the configuration said."""
    from gpufabric.cli.lab_cmd import app
    from gpufabric.lab.lab import Lab

    (tmp_path / "config.yaml").write_text(
        "segments:\n  ethernet: {vlan_range: 2100-2199, quarantine_vlan: 4001}\n"
    )
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))
    monkeypatch.delenv("GPUFABRIC_CONFIG", raising=False)
    seen: dict[str, Any] = {}

    def fake_up(self: Lab, *args: Any, **kwargs: Any) -> None:
        seen.update(kwargs)
        raise SystemExit(7)  # stop before anything is made

    monkeypatch.setattr(Lab, "up", fake_up)
    result = CliRunner().invoke(app.to_typer(), ["up", "--json"])
    assert result.exit_code == 7, result.output
    assert (seen["quarantine_vlan"], seen["uplink_vlans"]) == (4001, (2100, 2199))


def test_the_default_tenant_vlan_pool_has_one_source() -> None:
    """The lab's uplinks trunked a hard-coded ``(2000, 2999)``: the pool's bounds now appear as code
    nowhere but in the Ethernet kind's section default (a string there)."""
    found = {str(p.relative_to(SRC)): n for p in sorted(SRC.rglob("*.py")) if (n := number_count(p.read_text(), 2999))}
    assert found == {}


# ---- GPU count limit: the NVLink kind's lease term (fabrics/nvlink/kind.GPUS)
def test_the_gpu_count_limit_has_one_source() -> None:
    """The API's schemas and the store's checks read the range the NVLink kind declares for its
    lease term, which is its partition table's FM_MAX_NUM_GPUS."""
    from gpufabric.api.v1 import schemas
    from gpufabric.domain.errors import ValidationError
    from gpufabric.domain.terms import check_terms
    from gpufabric.fabrics.nvlink.kind import GPUS
    from gpufabric.fabrics.nvlink.segments import MAX_GPUS
    from gpufabric.store.registry import registered_terms

    assert (GPUS.minimum, GPUS.maximum) == (1, MAX_GPUS) and GPUS in registered_terms()
    for model in (schemas.LeaseIn, schemas.MoveIn, schemas.MovesIn, schemas.PreviewIn):
        gpus = model.model_json_schema()["properties"]["gpus"]["anyOf"][0]
        assert (gpus["minimum"], gpus["maximum"]) == (1, MAX_GPUS), model.__name__
    check_terms((("gpus", MAX_GPUS),), registered_terms())
    check_terms((), registered_terms())
    with pytest.raises(ValidationError) as e:
        check_terms((("gpus", MAX_GPUS + 1),), registered_terms(), "lease.")
    assert (e.value.field, e.value.allowed) == ("lease.gpus", f"1-{MAX_GPUS} GPUs, or unset for the whole node")


def test_the_store_refuses_a_lease_of_more_gpus_than_the_limit(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from gpufabric.domain.errors import ValidationError
    from gpufabric.domain.models import Inventory, Lease, Node
    from gpufabric.fabrics.nvlink.segments import MAX_GPUS
    from gpufabric.store.core import Store

    with Store.open(f"sqlite:///{tmp_path / 'x.db'}") as store:
        store.upsert_inventory(Inventory((Node("n1"),)))
        store.create_tenant("acme")
        with pytest.raises(ValidationError, match=f"1-{MAX_GPUS} GPUs"):
            store.create_lease(Lease("acme", "n1", datetime.now(UTC), terms=(("gpus", MAX_GPUS + 1),)))
        with pytest.raises(ValidationError, match="invalid lease.terms: 'colour'; allowed: gpus"):
            store.create_lease(Lease("acme", "n1", datetime.now(UTC), terms=(("colour", 1),)))  # no kind declares it
        assert store.leases() == []


# ---- "is this lease active": domain.models.lease_active, translated once to SQL (store.tables)
def test_only_the_rule_and_its_sql_translation_spell_out_a_lease_end() -> None:
    import re

    rule = re.compile(r"\bend\.is_\(None\)|\bend is None or [^)\n]*\bnow\b|\bend > now\b|\bnow < [a-z_.]*end\b")
    found = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if rule.search(p.read_text()))
    assert found == ["store/tables.py"], found  # the SQL translation; the rule itself is domain.models.lease_active
    assert rule.search("or_(LeaseRow.end.is_(None), LeaseRow.end > now)") and rule.search("r.end is None or r.end > now")


def test_a_lease_ending_exactly_now_is_over_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At one frozen ``now``: the domain rule, the store's active leases, the lease list the CLI and the
    API show (Reader.leases), a node's current lease (move requests) and the quota count agree; a lease
    ending exactly at ``now`` is over, one starting exactly at ``now`` has begun."""
    from datetime import UTC, datetime, timedelta

    from gpufabric.domain.auth import LOCAL_ADMIN
    from gpufabric.domain.models import Inventory, Lease, Node, lease_active
    from gpufabric.store import move_requests, queries
    from gpufabric.store.core import Store
    from gpufabric.store.tables import NodeRow

    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    class Frozen(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Frozen:
            return cls.fromtimestamp(now.timestamp(), tz)

    monkeypatch.setattr(queries, "datetime", Frozen)
    monkeypatch.setattr(move_requests, "datetime", Frozen)
    h = timedelta(hours=1)
    with Store.open(f"sqlite:///{tmp_path / 'x.db'}") as store:
        store.upsert_inventory(Inventory(tuple(Node(f"n{i}") for i in range(1, 4))))
        store.create_tenant("acme")
        ended = store.create_lease(Lease("acme", "n1", now - h, now))  # ends exactly now
        begun = store.create_lease(Lease("acme", "n2", now, now + h))  # starts exactly now
        store.create_lease(Lease("acme", "n3", now + h))  # still to come
        assert not lease_active(now - h, now, now) and lease_active(now, now + h, now)
        assert [x.id for x in store.leases(active_at=now)] == [begun.id]
        assert [x.id for x in store.leases() if x.active_at(now)] == [begun.id]
        rows, _ = queries.Reader(store).leases(LOCAL_ADMIN, 100, 0)
        assert {r["id"]: r["active"] for r in rows} == {ended.id: False, begun.id: True, ended.id + 2: False}
        active, _ = queries.Reader(store).leases(LOCAL_ADMIN, 100, 0, state="active")
        assert [r["id"] for r in active] == [begun.id]
        with store.tx() as tx:
            ids = {r.name: r.id for r in tx.session.query(NodeRow)}
            assert move_requests.active_lease(tx.session, ids["n1"], now) is None
            current = move_requests.active_lease(tx.session, ids["n2"], now)
            assert current is not None and current.id == begun.id
            assert move_requests.usage(tx, "acme", "leases") == 2  # the one begun and the one to come


# ---- the Ethernet dialects: fabrics/ethernet/drivers/ssh/dialects/*.yaml, each with its own port naming
def test_the_dialect_list_is_the_dialect_files() -> None:
    from gpufabric.fabrics.ethernet.drivers.ssh.dialects import DIALECT_DIR, DIALECTS, load_dialect

    assert tuple(sorted(p.stem for p in DIALECT_DIR.glob("*.yaml"))) == DIALECTS
    assert {"nxos", "eos", "junos", "os10", "sonic", "nvue", "ovs"} <= set(DIALECTS)
    for name in DIALECTS:
        d = load_dialect(name)
        assert d.name == name and d.port_naming is not None and d.port_naming.dialect == name


def test_no_module_outside_the_ethernet_folder_enumerates_the_dialects() -> None:
    """The dialect names appear as code (string tokens) only in ``fabrics/ethernet/``: the port
    patterns that domain/values.py used to key by dialect name now live in each dialect's file."""
    from gpufabric.fabrics.ethernet.drivers.ssh.dialects import DIALECTS

    names = set(DIALECTS) - {"ovs"}  # "ovs" also names the lab's Open vSwitch
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[:2] == ("fabrics", "ethernet"):
            continue
        toks = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        hits = [t.string for t in toks if t.type == tokenize.STRING and t.string.strip("\"'") in names]
        if hits:
            found[str(rel)] = hits
    assert found == {}


def test_inventory_import_checks_port_names_with_the_dialect_files_naming() -> None:
    """A switch's port names are checked with the pattern of its dialect's file (nxos: Ethernet1/12)."""
    from gpufabric.domain.errors import ValidationError
    from gpufabric.fabrics.ethernet.drivers.ssh.dialects import load_dialect, port_namings
    from gpufabric.workflow.inventory import inventory_from_dict

    fy = {"fabrics": [{"name": "eth", "kind": "ethernet", "section": [
        {"driver": "ssh", "options": {"switch": "leaf1", "dialect": "nxos"}},
        {"driver": "ovsdb", "options": {"switch": "br1"}},
        {"driver": "ssh", "options": {"switch": "odd", "dialect": "not-a-dialect"}}]}]}  # fmt: skip
    namings = port_namings(fy)
    assert namings == {"leaf1": load_dialect("nxos").port_naming, "br1": load_dialect("ovs").port_naming}

    def inv(port: str) -> Any:
        node = {"name": "n1", "ethernet": [{"name": "eth0", "switch": "leaf1", "switch_port": port}]}
        return inventory_from_dict({"version": 1, "nodes": [node]}, namings)

    assert ethernet_ports(inv("Ethernet1/12").nodes[0])[0].switch_port == "Ethernet1/12"
    with pytest.raises(ValidationError, match="a nxos interface name, e.g. Ethernet1/12"):
        inv("swp12")


# ---- the move-request parameters: one value, domain.moves.MoveRequest
def test_the_move_request_parameters_live_in_one_value() -> None:
    """MoveLedger.request/request_many and the store's per-node check take a MoveRequest instead of
    repeating its ten parameters (they were spelled out in 8 signatures)."""
    import dataclasses
    import inspect

    from gpufabric.domain.moves import MoveRequest
    from gpufabric.store.move_requests import new_move
    from gpufabric.store.moves import MoveLedger

    fields = {f.name for f in dataclasses.fields(MoveRequest)}
    assert {"to_tenant", "offering", "networks", "terms", "lease_end", "not_before", "grant", "offered"} <= fields
    for fn in (MoveLedger.request, MoveLedger.request_many, new_move):
        params = set(inspect.signature(fn).parameters)
        assert "req" in params and not params & fields, (fn.__qualname__, params & fields)
    req = MoveRequest("ta", networks=["a", "b"])  # type: ignore[arg-type]
    assert req.networks == ("a", "b") and MoveRequest("ta", networks=None).networks is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.terms = ()  # type: ignore[misc]


def test_the_open_statuses_have_one_source() -> None:
    """``move list --open`` (CLI, local and remote) and the store's open moves read one tuple."""
    from gpufabric.domain.move_json import FINISHED, OPEN
    from gpufabric.domain.moves import MoveStatus
    from gpufabric.store import move_requests

    assert move_requests.OPEN is OPEN
    assert set(OPEN) == {s.value for s in MoveStatus} - {"done", "cancelled"} and not set(OPEN) & (set(FINISHED) - {"failed"})
