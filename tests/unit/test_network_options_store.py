"""A network's own settings per instance through the store, the workflow and the CLI (issue 20,
item 4): ``--option INSTANCE.KEY=VALUE`` / the API's ``options`` are validated by the
instance's kind before anything is written (one-line errors naming ``options.<instance>.<key>``
or ``--option``), stored with the segment (``segments.options``, migration 0011), read back on
the domain value the planner uses and in the network JSON, adopted networks included.
SQLite store in tmp; no root, no device."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufabric.cli.main import app
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.errors import ValidationError
from gpufabric.engine.fabrics import network_kinds
from gpufabric.store.core import Store
from gpufabric.store.queries import Reader
from gpufabric.store.registry import Registry, parse_segments
from gpufabric.store.tenants import adopt_network

CFG = parse_segments()
RAW = {"fabrics": [
    {"name": "ethernet", "kind": "ethernet", "driver": "ovs", "options": {}},
    {"name": "ib-compute", "kind": "infiniband", "driver": "opensm", "options": {}},
    {"name": "ib-storage", "kind": "infiniband", "driver": "opensm", "options": {}},
]}  # fmt: skip


def kinds() -> list[Any]:
    return network_kinds(RAW, Registry.from_entry_points(), CFG)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    s.create_tenant("ta")
    yield s
    s.close()


def test_options_are_stored_with_their_segment_and_read_back(store: Store) -> None:
    net = adopt_network(store, "hpc", "ta", CFG, {}, kinds(), None, {"ib-compute": {"mtu": 5, "ipoib": True}})
    assert net.segment("ib-compute").options == (("ipoib", True), ("mtu", 5))  # type: ignore[union-attr]
    assert net.segment("ib-storage").options == ()  # type: ignore[union-attr]
    again = store.network("hpc", "ta")
    assert again == net and again.segment("ib-compute").options == (("ipoib", True), ("mtu", 5))  # type: ignore[union-attr]
    segs = {s["fabric"]: s for s in Reader(store).networks(LOCAL_ADMIN, 10, 0, "ta", "hpc")[0][0]["segments"]}
    assert segs["ib-compute"]["options"] == {"ipoib": True, "mtu": 5} and "options" not in segs["ib-storage"]


def test_an_adopted_network_keeps_its_options_too(store: Store) -> None:
    net = adopt_network(store, "neutron-1", "ta", CFG, {"ib-compute": 3007}, kinds(), None, {"ib-compute": {"rate": 16}})
    seg = net.segment("ib-compute")
    assert seg is not None and (seg.seg_id, seg.options) == (3007, (("rate", 16),))
    assert store.network("neutron-1", "ta").segment("ib-compute") == seg


@pytest.mark.parametrize(
    ("options", "field", "allowed"),
    [
        ({"ib-compute": {"mtu": 9}}, "options.ib-compute.mtu", "an integer 1-5"),
        ({"ib-compute": {"colour": 1}}, "options.ib-compute.colour", "one of the keys ipoib, mtu, rate, sl, scope"),
        ({"ethernet": {"mtu": 9000}}, "options.ethernet", "no options on fabric ethernet"),
        ({"ib-nope": {"mtu": 4}}, "options", "an instance the network spans (ethernet, ib-compute, ib-storage)"),
    ],
)
def test_bad_options_are_refused_naming_the_field_and_nothing_is_written(
    store: Store, options: dict[str, Any], field: str, allowed: str
) -> None:
    with pytest.raises(ValidationError) as e:
        adopt_network(store, "bad", "ta", CFG, {}, kinds(), None, options)
    assert (e.value.field, e.value.allowed) == (field, allowed)
    assert store.networks("ta") == []


def test_options_on_an_instance_the_network_does_not_span_are_refused(store: Store) -> None:
    with pytest.raises(ValidationError) as e:
        adopt_network(store, "c", "ta", CFG, {}, kinds(), ["ethernet", "ib-compute"], {"ib-storage": {"mtu": 4}})
    assert e.value.field == "options" and e.value.value == "ib-storage"
    assert store.networks("ta") == []


def test_the_cli_takes_option_and_names_it_when_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fabrics.yaml").write_text(yaml.safe_dump(RAW))
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))
    monkeypatch.setenv("GPUFABRIC_DB", "")
    run = CliRunner().invoke
    assert run(app, ["tenant", "create", "ta"]).exit_code == 0
    for bad, field in ((["--option", "mtu=5"], "--option"), (["--option", "ib-compute.mtu=five"], "--option ib-compute.mtu"),
                       (["--option", "ib-compute.mtu=7"], "options.ib-compute.mtu")):  # fmt: skip
        out = run(app, ["network", "create", "n0", "--tenant", "ta", *bad])
        assert isinstance(out.exception, ValidationError) and out.exception.field == field, (bad, out.output)
    made = run(app, ["network", "create", "n1", "--tenant", "ta", "--option", "ib-compute.mtu=5",
                     "--option", "ib-compute.ipoib=false", "--json"])  # fmt: skip
    assert made.exit_code == 0, made.output
    segs = {s["fabric"]: s for s in json.loads(made.output)["segments"]}
    assert segs["ib-compute"]["options"] == {"ipoib": False, "mtu": 5}
    table = run(app, ["network", "list"], env={"COLUMNS": "250"}).output
    assert "(ipoib=false, mtu=5)" in table and "n0" not in table
