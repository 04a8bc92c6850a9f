"""Every earlier schema revision, with data in it, upgraded to head on SQLite and PostgreSQL.

For each revision found in ``store/migrations/versions`` (whatever head is: a new migration
is picked up without editing this file): ``alembic upgrade`` an empty store to that revision,
insert a representative data set through the tables as they exist there (only the columns that
revision has: tenants, networks + segments, nodes with Ethernet/IB ports, GPUs and a DPU, a
custom offering, leases with networks, moves, the fabric epoch, tokens, events, move events),
then open the store (which migrates it to head) and read it back through the app: the Store,
the move ledger, token authentication, the API's Reader; and write to it (a new network gets a
fresh VLAN and PKey, the revision counters move).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, MetaData, inspect, select, text

from gpufabric.domain.auth import LOCAL_ADMIN, Role
from gpufabric.domain.errors import ConflictError
from gpufabric.domain.models import Inventory, Node, NodeState
from gpufabric.domain.moves import MovePhase, MoveStatus
from gpufabric.fabrics.dpu.entries import Dpu, DpuMode
from gpufabric.fabrics.dpu.entries.info import node_dpus
from gpufabric.fabrics.dpu.plan.profiles import offering_mode
from gpufabric.fabrics.ethernet.entries import EthernetPort, ethernet_ports, with_ethernet
from gpufabric.fabrics.infiniband.entries import all_ib_ports
from gpufabric.fabrics.nvlink.entries import node_gpus
from gpufabric.store import db
from gpufabric.store.auth import TOKEN_PREFIX, Tokens
from gpufabric.store.core import Store
from gpufabric.store.moves import MoveLedger
from gpufabric.store.queries import Reader
from gpufabric.store.registry import parse_segments

from support.migrate import alembic

REVISIONS = [r.revision for r in reversed(list(ScriptDirectory.from_config(db._config()).walk_revisions()))]
SECRET = TOKEN_PREFIX + "migration-test-secret-0123456789abcdef"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_revisions_are_found_in_order() -> None:
    assert REVISIONS[0] == "0001" and REVISIONS[-1] == db.head_revision() and len(REVISIONS) >= 5
    assert sorted(REVISIONS) == REVISIONS


@dataclass
class Seeded:
    """What the data set put in: the revision it was written at and the ids it got."""

    revision: str
    tables: set[str]
    columns: dict[str, set[str]]
    ids: dict[str, int]


class Inserter:
    """Inserts rows through the tables as reflected at the store's current revision, with only
    the columns that revision has (RETURNING gives the ids: PostgreSQL's sequences stay right)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.meta = MetaData()
        self.meta.reflect(conn)
        self.sqlite = conn.dialect.name == "sqlite"

    def ts(self, d: datetime) -> datetime:
        return d.replace(tzinfo=None) if self.sqlite else d  # as UtcDateTime stores it

    def has(self, table: str, column: str | None = None) -> bool:
        t = self.meta.tables.get(table)
        return t is not None and (column is None or column in t.c)

    def add(self, table: str, **values: Any) -> int | None:
        t = self.meta.tables.get(table)
        if t is None:
            return None
        row = {k: (self.ts(v) if isinstance(v, datetime) else v) for k, v in values.items() if k in t.c}
        if "id" in t.c:
            return int(self.conn.execute(t.insert().values(row).returning(t.c.id)).scalar_one())
        self.conn.execute(t.insert().values(row))
        return None


def seed(conn: Connection, revision: str) -> Seeded:
    ins = Inserter(conn)
    ids: dict[str, int] = {}

    def add(key: str, table: str, **values: Any) -> None:
        got = ins.add(table, **values)
        if got is not None:
            ids[key] = got

    add("alpha", "tenants", name="alpha", created_at=T0)
    add("beta", "tenants", name="beta", created_at=T0)
    add("alpha-net", "networks", name="alpha-net", tenant_id=ids["alpha"], created_at=T0)
    add("beta-net", "networks", name="beta-net", tenant_id=ids["beta"], created_at=T0)
    for net, vlan, seg, pkey in (("alpha-net", 2000, 3000, 0x0A00), ("beta-net", 2001, 3001, 0x0A01)):
        if ins.has("segments", "vlan"):  # typed columns until 0016, then the kinds' keys
            ins.add("segments", network_id=ids[net], fabric="ethernet", seg_id=vlan, vlan=vlan)
            ins.add("segments", network_id=ids[net], fabric="infiniband", seg_id=seg, pkey=pkey)
        else:
            ins.add("segments", network_id=ids[net], fabric="ethernet", seg_id=vlan, scope="ethernet.vlan", key=vlan)
            ins.add("segments", network_id=ids[net], fabric="infiniband", seg_id=seg, scope="infiniband.pkey", key=pkey)
    add("n1", "nodes", name="gpu-a01", offering="baremetal", state="leased")
    add("n2", "nodes", name="gpu-a02", offering="openshift", state="moving", owner="beta")
    for i, node in enumerate(("n1", "n2"), start=1):
        eth = {"name": "eth0", "switch": "leaf-1", "switch_port": f"Ethernet{i}", "mac": f"52:54:00:00:00:0{i}"}
        hca = {"device": "mlx5_0", "port_num": 1, "port_guid": f"0x0002c9030000010{i}", "node_guid": f"0x0002c9030001010{i}",
               "switch_guid": "0x0002c90300f00001", "switch_port": i}  # fmt: skip
        if ins.has("ethernet_ports"):  # their own tables until 0015, then the one port table and its keys
            ins.add("ethernet_ports", node_id=ids[node], **eth)
            ins.add("ib_ports", node_id=ids[node], **hca)
            continue
        ins.add("node_fabric_ports", node_id=ids[node], instance="ethernet", data=[eth])
        ins.add("node_fabric_ports", node_id=ids[node], instance="infiniband", data=[hca])
        for scope, key in (("ethernet.switch_port", f"leaf-1/Ethernet{i}"), ("infiniband.port_guid", hca["port_guid"]),
                           ("infiniband.node_guid", hca["node_guid"])):  # fmt: skip
            ins.add("node_port_keys", node_id=ids[node], scope=scope, key=key)
    if ins.has("gpus"):  # its own table until 0013, then the generic one
        for m in (1, 2):
            ins.add("gpus", node_id=ids["n1"], module_id=m, pci_bus_id=f"0000:{0x1B + m:02x}:00.0")
    else:
        ins.add("node_fabric_ports", node_id=ids["n1"], instance="nvlink",
                data=[{"module_id": m, "pci_bus_id": f"0000:{0x1B + m:02x}:00.0"} for m in (1, 2)])  # fmt: skip
    if ins.has("dpus"):  # its own table until 0012 (details since 0003), then the generic one
        ins.add("dpus", node_id=ids["n2"], name="bf3-0", mode="dpu-host", details={"pf": "ens1f0", "vfs": 16})
    else:
        ins.add("node_fabric_ports", node_id=ids["n2"], instance="dpu",
                data=[{"name": "bf3-0", "mode": "dpu-host", "pf": "ens1f0", "vfs": "16"}])  # fmt: skip
    if ins.has("offerings", "dpu_mode"):  # a column until 0014, then the DPU kind's setting of the offering
        ins.add("offerings", name="h100-ib", description="IB-only H100 nodes", dpu_mode="full", settings=[])
        ins.add("offerings", name="ocp-bf", description="OpenShift on BlueField", dpu_mode="dpu", settings=[["k", "v"]])
    else:
        ins.add("offerings", name="h100-ib", description="IB-only H100 nodes", settings=[])
        ins.add("offerings", name="ocp-bf", description="OpenShift on BlueField", settings=[["dpu_mode", "dpu"], ["k", "v"]])
    terms = {"gpus": 2} if ins.has("leases", "gpus") else {"terms": {"gpus": 2}}  # the NVLink kind's lease term (0014)
    add("lease", "leases", tenant_id=ids["alpha"], node_id=ids["n1"], start=T0, end=None, offering="baremetal",
        owner="admin", created_at=T0, **terms)  # fmt: skip
    ins.add("lease_networks", lease_id=ids["lease"], network_id=ids["alpha-net"])
    move = {"from_tenant": "quarantine", "offering": "baremetal", "attempts": 0, "error": "", "created_at": T0,
            "updated_at": T0, "requested_by": "admin"}  # fmt: skip
    add("m-done", "moves", node="gpu-a01", to_tenant="alpha", phase="done", status="done", networks="alpha-net",
        **terms, **move)  # fmt: skip
    add("m-open", "moves", node="gpu-a02", to_tenant="beta", phase="swap", status="failed", networks="beta-net",
        **{**move, "attempts": 1, "error": "ib: verify timed out"})  # fmt: skip
    ins.add("fabric_epoch", id=1, epoch=7, writer="host-a:123:serve")
    add("token", "tokens", name="ops", role="admin", tenant=None, secret_sha256=hashlib.sha256(SECRET.encode()).hexdigest(),
        created_at=T0, created_by="local")  # fmt: skip
    add("event", "events", at=T0, actor="local", role="admin", tenant="alpha", action="lease.create",
        target="gpu-a01", outcome="ok", message="lease 1")  # fmt: skip
    if "m-done" in ids:
        ins.add("move_events", move_id=ids["m-done"], at=T0, phase="join", message="joined", seconds=0.05)
    return Seeded(revision, set(ins.meta.tables), {n: set(t.c.keys()) for n, t in ins.meta.tables.items()}, ids)


def _at_revision(url: str, revision: str) -> Seeded:
    engine = db.make_engine(url)
    try:
        with engine.begin() as conn:
            cfg = db._config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
        with engine.begin() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == revision
            return seed(conn, revision)
    finally:
        engine.dispose()


@pytest.mark.parametrize("revision", REVISIONS)
def test_upgrade_from_revision_keeps_the_data_and_the_app_reads_it(store_url: str, revision: str) -> None:
    seeded = _at_revision(store_url, revision)
    since = {t: t in seeded.tables for t in ("tokens", "events", "move_events", "fabric_epoch")}
    gpus_col = bool({"gpus", "terms"} & seeded.columns["leases"])  # a count stored since 0003
    with Store.open(store_url) as s:  # migrates to head
        with s.engine.connect() as c:
            assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == db.head_revision()
        assert [n.name for n in s.nodes()] == ["gpu-a01", "gpu-a02"]
        n1, n2 = s.node("gpu-a01"), s.node("gpu-a02")
        assert n1.state is NodeState.LEASED and n2.state is NodeState.MOVING
        assert [(p.switch, p.switch_port, str(p.mac)) for p in ethernet_ports(n1)] == [("leaf-1", "Ethernet1", "52:54:00:00:00:01")]
        assert [str(p.port_guid) for p in all_ib_ports(n2)] == ["0x0002c90300000102"]
        assert [(g.module_id.value, g.pci_bus_id) for g in node_gpus(n1)] == [(1, "0000:1c:00.0"), (2, "0000:1d:00.0")]
        details = (("pf", "ens1f0"), ("vfs", "16")) if "details" in seeded.columns.get("dpus", {"details"}) else ()
        assert node_dpus(n2) == (Dpu("gpu-a02", "bf3-0", DpuMode.DPU_HOST, details),)
        assert [t.name for t in s.tenants()] == ["alpha", "beta"]
        net = s.network("alpha-net", "alpha")
        eth, ib = net.segment("ethernet"), net.segment("infiniband")
        assert eth is not None and eth.seg_id == 2000 and ib is not None and ib.seg_id == 3000
        assert (eth.scope, eth.key, ib.scope, ib.key) == ("ethernet.vlan", 2000, "infiniband.pkey", 0x0A00)  # 0016
        offerings = {o.name: o for o in s.offerings()}
        assert "h100-ib" in offerings and "openstack" in offerings
        assert offerings["ocp-bf"].settings == (("dpu_mode", "dpu"), ("k", "v")) and offerings["h100-ib"].settings == ()
        assert offering_mode(offerings["ocp-bf"]) is DpuMode.DPU and offering_mode(offerings["h100-ib"]) is DpuMode.FULL
        lease = s.lease(seeded.ids["lease"])
        assert (lease.tenant, lease.node, lease.networks, lease.end) == ("alpha", "gpu-a01", ("alpha-net",), None)
        assert lease.terms == ((("gpus", 2),) if gpus_col else ())
        assert [x.id for x in s.leases(active_at=datetime.now(UTC))] == [seeded.ids["lease"]]

        moves = {m.node: m for m in MoveLedger(s).moves()}
        assert set(moves) == {"gpu-a01", "gpu-a02"}
        done, failed = moves["gpu-a01"], moves["gpu-a02"]
        has_networks = "networks" in seeded.columns["moves"]
        assert (done.phase, done.status, done.to_tenant) == (MovePhase.DONE, MoveStatus.DONE, "alpha")
        assert (failed.phase, failed.status, failed.error) == (MovePhase.SWAP, MoveStatus.FAILED, "ib: verify timed out")
        assert failed.networks == (("beta-net",) if has_networks else ())
        assert done.terms == ((("gpus", 2),) if {"gpus", "terms"} & seeded.columns["moves"] else ())
        assert failed.requested_by == ("admin" if "requested_by" in seeded.columns["moves"] else "")

        tokens = Tokens(s)
        if since["tokens"]:
            assert [t.name for t in tokens.list()] == ["ops"]
            p = tokens.authenticate(SECRET)
            assert p.role is Role.ADMIN and p.name == "ops"
        else:
            assert tokens.list() == []
        reader = Reader(s)
        api_nodes, total = reader.nodes(LOCAL_ADMIN, 100, 0)
        assert total == 2 and [n["name"] for n in api_nodes] == ["gpu-a01", "gpu-a02"]
        assert api_nodes[1]["owner"] == ("beta" if "owner" in seeded.columns["nodes"] else None)
        api_leases, lease_total = reader.leases(LOCAL_ADMIN, 100, 0)
        assert lease_total == 1 and api_leases[0]["node"] == "gpu-a01"
        assert api_leases[0]["gpus"] == (2 if gpus_col else None)  # the answer's field, as before 0014
        api_offerings = {o["name"]: o for o in reader.offerings(100, 0)[0]}
        assert api_offerings["ocp-bf"] == {"name": "ocp-bf", "description": "OpenShift on BlueField", "dpu_mode": "dpu",
                                           "settings": {"k": "v"}}  # fmt: skip
        assert api_offerings["openshift"]["dpu_mode"] == "dpu-host" and api_offerings["h100-ib"]["dpu_mode"] == "full"
        assert reader.moves(LOCAL_ADMIN, 100, 0)[1] == 2
        evs = [e["action"] for e in reader.events(LOCAL_ADMIN, 100, 0)[0]]
        assert evs == (["lease.create"] if since["events"] else [])
        if since["move_events"]:
            assert [e["message"] for e in reader.move_events(seeded.ids["m-done"])] == ["joined"]

        # and it takes writes: the pools skip what the old data holds; the revision counters move
        before = reader.revision()
        with s.engine.connect() as c:
            inv_before = c.execute(text("SELECT n FROM gf_revision WHERE id = 2")).scalar()
        s.create_tenant("gamma")
        fresh = s.create_network("gamma-net", "gamma", parse_segments())
        seg_eth, seg_ib = fresh.segment("ethernet"), fresh.segment("infiniband")
        assert seg_eth is not None and seg_eth.seg_id not in (2000, 2001)
        assert seg_ib is not None and seg_ib.seg_id not in (3000, 3001)
        assert reader.revision() > before
        with s.engine.connect() as c:
            assert c.execute(text("SELECT n FROM gf_revision WHERE id = 2")).scalar() > inv_before
            assert c.execute(select(text("count(*)")).select_from(text("tenants"))).scalar() == 3


def test_the_dpu_and_nvlink_columns_move_into_the_generic_table_and_back(store_url: str) -> None:
    """0012 and 0013 move a node's ``dpus`` and ``gpus`` rows into its generic-table rows of the
    two kinds' default instances (details and PCI addresses kept); their downgrades put them
    back; upgrading again reads the same DPU and GPUs."""
    _at_revision(store_url, "0011")
    want = (Dpu("gpu-a02", "bf3-0", DpuMode.DPU_HOST, (("pf", "ens1f0"), ("vfs", "16"))),)
    gpus = [(1, "0000:1c:00.0"), (2, "0000:1d:00.0")]

    def read_back() -> None:
        with Store.open(store_url) as s:
            assert node_dpus(s.node("gpu-a02")) == want
            assert [(g.module_id.value, g.pci_bus_id) for g in node_gpus(s.node("gpu-a01"))] == gpus
            with s.engine.connect() as c:
                q = text("SELECT instance FROM node_fabric_ports WHERE instance IN ('dpu', 'nvlink') ORDER BY instance")
                assert c.execute(q).scalars().all() == ["dpu", "nvlink"]

    read_back()
    alembic(store_url, "downgrade", "0011")
    engine = db.make_engine(store_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT name, mode, details FROM dpus")).all()
            assert [(r[0], r[1]) for r in rows] == [("bf3-0", "dpu-host")]
            details = rows[0][2] if isinstance(rows[0][2], dict) else json.loads(rows[0][2])
            assert details == {"pf": "ens1f0", "vfs": "16"}
            assert [tuple(r) for r in conn.execute(text("SELECT module_id, pci_bus_id FROM gpus ORDER BY module_id"))] == gpus
            assert conn.execute(text("SELECT count(*) FROM node_fabric_ports")).scalar() == 0
    finally:
        engine.dispose()
    read_back()


def _app_view(url: str) -> dict[str, Any]:
    """What the app reads of a store (opened, so migrated to head): the API's rows and the domain values."""
    with Store.open(url) as s:
        reader = Reader(s)
        return {
            "nodes": s.nodes(), "leases": s.leases(), "moves": MoveLedger(s).moves(), "offerings": s.offerings(),
            "api_leases": reader.leases(LOCAL_ADMIN, 100, 0), "api_moves": reader.moves(LOCAL_ADMIN, 100, 0),
            "api_offerings": reader.offerings(100, 0), "api_nodes": reader.nodes(LOCAL_ADMIN, 100, 0),
        }  # fmt: skip


def test_head_goes_back_to_the_previous_revision_and_up_again_with_its_data(store_url: str) -> None:
    """head -> the revision before it -> head: the app reads the same data (whatever head is)."""
    _at_revision(store_url, REVISIONS[-2])
    first = _app_view(store_url)
    alembic(store_url, "downgrade", REVISIONS[-2])
    assert _app_view(store_url) == first


def test_lease_terms_and_the_offering_mode_move_into_json_and_back(store_url: str) -> None:
    """0014: the ``gpus`` columns of leases and moves become their ``terms`` (``{"gpus": n}``) and
    ``offerings.dpu_mode`` the offering's ``dpu_mode`` setting (none for ``full``); the downgrade
    puts both back; rows referring to leases (their networks) and the ids stay."""
    seeded = _at_revision(store_url, "0013")

    def read_back() -> None:
        with Store.open(store_url) as s:
            lease = s.lease(seeded.ids["lease"])
            assert (lease.terms, lease.networks, lease.id) == ((("gpus", 2),), ("alpha-net",), seeded.ids["lease"])
            assert {m.id: m.terms for m in MoveLedger(s).moves()} == {seeded.ids["m-done"]: (("gpus", 2),),
                                                                     seeded.ids["m-open"]: ()}  # fmt: skip
            offerings = {o.name: o.settings for o in s.offerings()}
            assert offerings["ocp-bf"] == (("dpu_mode", "dpu"), ("k", "v")) and offerings["h100-ib"] == ()
            assert offerings["openshift"] == (("dpu_mode", "dpu-host"),)
            with s.engine.connect() as c:
                assert "gpus" not in {col["name"] for col in inspect(c).get_columns("leases")}
                assert "dpu_mode" not in {col["name"] for col in inspect(c).get_columns("offerings")}

    read_back()
    alembic(store_url, "downgrade", "0013")
    engine = db.make_engine(store_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT id, gpus FROM leases")).all() == [(seeded.ids["lease"], 2)]
            assert dict(conn.execute(text("SELECT id, gpus FROM moves")).all()) == {seeded.ids["m-done"]: 2,
                                                                                   seeded.ids["m-open"]: None}  # fmt: skip
            modes = {r[0]: (r[1], r[2] if isinstance(r[2], list) else json.loads(r[2]))
                     for r in conn.execute(text("SELECT name, dpu_mode, settings FROM offerings"))}  # fmt: skip
            assert modes["ocp-bf"] == ("dpu", [["k", "v"]]) and modes["h100-ib"] == ("full", [])
            assert modes["openshift"] == ("dpu-host", [])
            assert conn.execute(text("SELECT count(*) FROM lease_networks")).scalar() == 1
            assert "terms" not in {col["name"] for col in inspect(conn).get_columns("moves")}
    finally:
        engine.dispose()
    read_back()


def test_the_ethernet_and_infiniband_columns_move_into_the_port_table_with_their_keys_and_back(store_url: str) -> None:
    """0015 moves a node's ``ethernet_ports`` and ``ib_ports`` rows into its port-table rows of the
    two kinds' default instances and writes the keys they hold (``node_port_keys``: the store's
    uniqueness and its port lookup); downgrade puts the rows back; upgrading again reads the same."""
    _at_revision(store_url, "0014")

    def read_back() -> None:
        with Store.open(store_url) as s:
            n1, n2 = s.node("gpu-a01"), s.node("gpu-a02")
            assert [(p.name, p.switch, p.switch_port, p.mac) for p in ethernet_ports(n2)] == [
                ("eth0", "leaf-1", "Ethernet2", "52:54:00:00:00:02")]
            assert [(p.device, str(p.port_guid), str(p.node_guid), p.switch_port) for p in all_ib_ports(n1)] == [
                ("mlx5_0", "0x0002c90300000101", "0x0002c90300010101", 1)]
            with s.engine.connect() as c:
                keys = c.execute(text("SELECT n.name, k.scope, k.key FROM node_port_keys k JOIN nodes n ON n.id = k.node_id"
                                      " ORDER BY n.name, k.scope")).all()  # fmt: skip
            assert [tuple(k) for k in keys] == [
                ("gpu-a01", "ethernet.switch_port", "leaf-1/Ethernet1"), ("gpu-a01", "infiniband.node_guid", "0x0002c90300010101"),
                ("gpu-a01", "infiniband.port_guid", "0x0002c90300000101"),
                ("gpu-a02", "ethernet.switch_port", "leaf-1/Ethernet2"), ("gpu-a02", "infiniband.node_guid", "0x0002c90300010102"),
                ("gpu-a02", "infiniband.port_guid", "0x0002c90300000102")]  # fmt: skip
            assert Reader(s).lookup_port(LOCAL_ADMIN, "infiniband.port_guid", "0x0002c90300000102") == "gpu-a02"
            thief = with_ethernet(Node("gpu-a03"), EthernetPort("gpu-a03", "eth0", "leaf-1", "Ethernet1"))
            with pytest.raises(ConflictError, match="switch port leaf-1/Ethernet1 .*already belongs to node gpu-a01"):
                s.upsert_inventory(Inventory((thief,)))

    read_back()
    alembic(store_url, "downgrade", "0014")
    engine = db.make_engine(store_url)
    try:
        with engine.connect() as conn:
            assert [tuple(r) for r in conn.execute(text("SELECT switch_port, mac FROM ethernet_ports ORDER BY switch_port"))] == [
                ("Ethernet1", "52:54:00:00:00:01"), ("Ethernet2", "52:54:00:00:00:02")]
            assert [tuple(r) for r in conn.execute(text("SELECT port_guid, switch_port, instance FROM ib_ports ORDER BY port_guid"))] == [
                ("0x0002c90300000101", 1, None), ("0x0002c90300000102", 2, None)]
            q = text("SELECT DISTINCT instance FROM node_fabric_ports ORDER BY instance")
            assert conn.execute(q).scalars().all() == ["dpu", "nvlink"]
    finally:
        engine.dispose()
    read_back()
