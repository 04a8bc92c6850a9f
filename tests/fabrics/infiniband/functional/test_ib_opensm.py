"""OpenSMDriver against a real OpenSM 3.3.23 on ibsim (started here, in a temp dir).

Fabric: 4 GPU nodes x 1 HCA + the SM node (lab net file generator). Every assertion on
tables is on PKey tables read with SMPs (the batch reader or smpquery pkeys), not on
OpenSM's view. Tests taking ``reader`` run with both SMP readers.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufabric.domain.errors import ApplyError, CapacityError, FabricError
from gpufabric.domain.values import Guid, Membership, PKey
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.readers.diags import parse_opensm_log
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.partitions import parse_partitions_conf, render_partitions_conf
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_port_guid

pytestmark = pytest.mark.root

SM = hca_port_guid(0, 0)
G = [hca_port_guid(n, 0) for n in range(1, 5)]  # gpu-a01..a04 mlx5_0


def driver_for(fab: IbFabric, **kw: object) -> OpenSMDriver:
    cfg = dataclasses.replace(
        OpenSMConfig.from_options(fab.driver_options(SM_NODE, [SM])),
        verify_timeout=10,
        sweep_timeout=30,
        **kw,  # type: ignore[arg-type]
    )
    return OpenSMDriver(cfg)


@pytest.fixture(scope="module")
def fab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IbFabric]:
    f = IbFabric(tmp_path_factory.mktemp("ib"), f"gf-t-osm-{os.getpid()}", SM_NODE)
    try:
        f.start_ibsim(generate_netfile(4, 1))
        f.start_opensm()
        yield f
    finally:
        f.stop()


def tenants(a: list[Guid], b: list[Guid]) -> PartitionLayout:
    return PartitionLayout(
        (
            Partition("tenant-a", PKey(0x0A01), tuple(PartitionMember(g) for g in a)),
            Partition("tenant-b", PKey(0x0B01), tuple(PartitionMember(g) for g in b), ipoib=True),
        )
    )


def entries(drv: OpenSMDriver) -> dict[Guid, frozenset[int]]:
    return {t.port_guid: frozenset(t.entries) for t in drv.tables([SM, *G])}


READERS = pytest.mark.parametrize("reader", ["batch", "smpquery"])


@READERS
def test_two_tenants_exactly_their_guids_full(fab: IbFabric, reader: str) -> None:
    drv = driver_for(fab, reader=reader)
    drv.apply(PartitionLayout())  # from the safe default, whatever ran before
    drv.apply(tenants(G[:2], G[2:]))
    assert entries(drv) == {
        SM: {0xFFFF},
        G[0]: {0x7FFF, 0x8A01},
        G[1]: {0x7FFF, 0x8A01},
        G[2]: {0x7FFF, 0x8B01},
        G[3]: {0x7FFF, 0x8B01},
    }
    state = drv.observe()
    full_a = {t.port_guid for t in state.tables if 0x0A01 in t.full_keys()}
    assert full_a == set(G[:2])
    assert state.master_guid == SM
    assert drv.last_report.reloads == 1
    assert fab.partitions_conf.with_name("partitions.conf.last-good").read_text() == fab.partitions_conf.read_text()


def test_reapply_same_layout_does_not_reload(fab: IbFabric) -> None:
    drv = driver_for(fab)
    drv.apply(tenants(G[:2], G[2:]))
    drv.apply(tenants(G[:2], G[2:]))
    assert drv.last_report.reloads == 0
    assert drv.last_report.changed is False


@READERS
def test_move_node_remove_then_add(fab: IbFabric, reader: str) -> None:
    drv = driver_for(fab, reader=reader)
    drv.apply(tenants(G[:2], G[2:]))
    drv.apply(tenants(G[:1], G[2:]))  # step 1: out of tenant-a, verified
    assert entries(drv)[G[1]] == {0x7FFF}
    drv.apply(tenants(G[:1], G[1:]))  # step 2: into tenant-b, verified
    after = entries(drv)
    assert after[G[1]] == {0x7FFF, 0x8B01}
    assert after[G[0]] == {0x7FFF, 0x8A01}


def test_a_file_written_but_never_loaded_is_loaded_when_applied_again(fab: IbFabric) -> None:
    """A worker killed after writing partitions.conf and before OpenSM's reload (a crash the move
    engine resumes from) leaves the new file on disk and the old tables on the fabric. Applying
    the same layout again must reload it: the port it takes out of a tenant is named by neither
    the file nor the layout any more, only by the last verified file."""
    drv = driver_for(fab)
    drv.apply(tenants(G[:2], G[2:]))
    quarantined = tenants(G[:1], G[2:])  # G[1] leaves tenant-a and no partition names it
    drv.write_partitions(quarantined)  # ... and the worker dies before the reload
    assert entries(drv)[G[1]] == {0x7FFF, 0x8A01}  # the fabric still has the old tables
    fresh = driver_for(fab)  # the next worker, a new process
    fresh.apply(quarantined)
    assert fresh.last_report.reloads == 1
    assert entries(fresh)[G[1]] == {0x7FFF}
    assert fab.partitions_conf.with_name("partitions.conf.last-good").read_text() == fab.partitions_conf.read_text()


class BrokenRender(OpenSMDriver):
    def render(self, layout: PartitionLayout) -> str:
        return super().render(layout) + "this line is not a partition\n"


@READERS
def test_broken_file_rolls_back_to_last_good(fab: IbFabric, reader: str) -> None:
    good = tenants(G[:2], G[2:])
    driver_for(fab, reader=reader).apply(good)
    before = entries(driver_for(fab, reader=reader))
    with pytest.raises(ApplyError) as ei:
        BrokenRender(driver_for(fab, reader=reader).config).apply(tenants(G[:3], G[3:]))
    assert "PARSE ERROR" in ei.value.message
    assert ei.value.fields["rolled_back"] is True
    assert ei.value.fields["rollback_verified"] is True
    assert entries(driver_for(fab, reader=reader)) == before  # SMP reads: the last good tables, not 0xffff everywhere
    assert parse_partitions_conf(fab.partitions_conf.read_text()) == parse_partitions_conf(
        render_partitions_conf(good, [SM])
    )


def test_capacity_refused_before_any_change(fab: IbFabric) -> None:
    drv = driver_for(fab)
    drv.apply(tenants(G[:2], G[2:]))
    text, ups = fab.partitions_conf.read_text(), parse_opensm_log(fab.log_since(0)).subnet_up
    big = PartitionLayout(tuple(Partition(f"p{i}", PKey(i), (PartitionMember(G[0]),)) for i in range(1, 65)))
    with pytest.raises(CapacityError) as ei:
        drv.apply(big)
    assert ei.value.device == str(G[0])
    assert fab.partitions_conf.read_text() == text
    assert parse_opensm_log(fab.log_since(0)).subnet_up == ups  # no reload happened


def test_unknown_guid_refused(fab: IbFabric) -> None:
    drv = driver_for(fab)
    with pytest.raises(FabricError) as ei:
        drv.apply(tenants([G[0], Guid(0xDEAD)], G[2:]))
    assert ei.value.fields["missing"] == [str(Guid(0xDEAD))]


guids = st.sampled_from([*G, Guid(0x0002C903FFFF0001)])  # plus one GUID not on the fabric


@st.composite
def layouts(draw: st.DrawFn) -> PartitionLayout:
    n = draw(st.integers(0, 5))
    keys = draw(st.lists(st.integers(PKey.MIN, PKey.MAX), min_size=n, max_size=n, unique=True))
    names = draw(
        st.lists(
            st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,30}", fullmatch=True), min_size=n, max_size=n, unique_by=str.lower
        )
    )
    return PartitionLayout(
        tuple(
            Partition(
                nm if nm.lower() != "default" else "x" + nm,
                PKey(k),
                tuple(draw(st.lists(st.builds(PartitionMember, guids, st.sampled_from(Membership)), max_size=4))),
                draw(st.booleans()),
            )
            for nm, k in zip(names, keys, strict=True)
        ),
        tuple(draw(st.lists(guids, max_size=2))),
        draw(st.booleans()),
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=layouts())
def test_real_opensm_parses_every_rendered_layout(fab: IbFabric, layout: PartitionLayout) -> None:
    fab.write_partitions(render_partitions_conf(layout, [SM]))
    offset = fab.hup()
    fab.wait_subnet_up(offset, timeout=30)
    scan = parse_opensm_log(fab.log_since(offset))
    assert scan.parse_errors == ()
    assert scan.pkey_errors == ()


def test_observe_carries_the_cabling_the_import_stores(fab: IbFabric) -> None:
    """IB-CABLING (issue 31's leftovers, item 3): each port's switch GUID/port in the observed
    state (the ``-p`` topology observe reads the ports by) is the one the import stores from
    ``ibnetdiscover``'s topology, so a clean lab has no cabling finding."""
    from gpufabric.fabrics.infiniband.inventory.match import match_ca_ports
    from gpufabric.fabrics.infiniband.readers.ibnetdiscover import parse_ibnetdiscover

    drv = driver_for(fab)
    seen = {c.port_guid: (c.switch_guid, c.switch_port) for c in drv.observe().cabling}
    stored, _ = match_ca_ports(parse_ibnetdiscover(drv.diag.run(["ibnetdiscover", *drv.diag.key_args()])))
    assert {p.port_guid for p in stored} == set(seen) == {SM, *G}
    assert {p.port_guid: (p.switch_guid, p.switch_port) for p in stored} == seen
    assert all(sw is not None and port for sw, port in seen.values())
