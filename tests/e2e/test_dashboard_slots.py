"""The dashboard's drawings (issue 33 item 6) in headless Chromium (Debian ``chromium`` driven by
playwright) against the API served over a store: a shared host (``vm-host``, leased to ``infra``)
with slots of three tenants (alpha 1-4, beta 5-6, gamma 7) and an idle one (8), a host leased
whole to delta, a host in quarantine. Each slot's GPUs (and their rail HCAs and VM ports, when
the kinds record the ``gpu`` affinity) carry its tenant's colour and a title naming slot and
tenant; the idle GPU is grey; the whole-node lease fills its board; the fabric drawings hold the
leaves and spines of the ports' paths with each host under its leaf, the shared one split into
its slots' colours. Screenshots: ``hosts.png``, ``fabric.png`` and ``page.png`` under the test's
tmp_path (pytest's basetemp, e.g. /tmp/pytest-of-root/pytest-N/test_the_boards_...0/)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpufabric.api.deps import ApiContext
from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.domain.models import Inventory, Lease, Node, NodeState
from gpufabric.domain.slots import slot_name
from gpufabric.fabrics.ethernet import entries as eth_entries
from gpufabric.fabrics.infiniband import entries as ib_entries
from gpufabric.store.core import Store
from gpufabric.store.registry import parse_segments, registered_kinds
from gpufabric.workflow.actions import Actions
from gpufabric.workflow.inventory import inventory_from_dict

from support.live_api import live_api

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]  # fmt: skip
ANSWERED = "Failed to load resource: the server responded with a status of"
HOSTS = ("gpu-h01", "gpu-h02", "gpu-h03")
SLOTS = {"alpha": (1, 2, 3, 4), "beta": (5, 6), "gamma": (7,), "": (8,)}  # "": an idle slot (its lease ended)
RAILS = "gpu" in ib_entries.KEYS  # the kinds record a GPU's rail HCA / VM port (issue 33 items 3, 4)
VM_PORTS = "gpu" in eth_entries.KEYS
UPLINKS = [
    {"driver": "ovsdb", "options": {"switch": s}, "uplinks": ["spine-1", "spine-2"]} for s in ("leaf-1", "leaf-2")
]


def _inventory() -> dict[str, Any]:
    nodes = []
    for i, name in enumerate(HOSTS):
        leaf = 1 if i < 2 else 2  # h01 and h02 under leaf 1, h03 under leaf 2
        eth: list[dict[str, Any]] = [{"name": "eth0", "switch": f"leaf-{leaf}", "switch_port": f"Ethernet{i + 1}"}]
        if VM_PORTS and i == 0:  # the shared host's VM ports on its own OVS
            eth += [{"name": f"vm{g}", "switch": f"hv-{name}", "switch_port": f"vm{g}", "gpu": g} for g in range(1, 9)]
        ib = [{"device": f"mlx5_{j}", "port_num": 1, "port_guid": f"0x0002c903{i:04x}{j:04x}",
               "node_guid": f"0x0002c904{i:04x}{j:04x}", "path": [[f"ib-leaf-{leaf}"], ["ib-spine-1", "ib-spine-2"]],
               **({"gpu": j + 1} if RAILS else {})} for j in range(8)]  # fmt: skip
        nodes.append({"name": name, "offering": "baremetal", "ethernet": eth, "ib": ib,
                      "gpus": [{"module_id": g} for g in range(1, 9)]})  # fmt: skip
    return {"version": 1, "nodes": nodes}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium (scripts/setup.sh installs it)")
    home = tmp_path_factory.mktemp("slots-world")
    store = Store.open(f"sqlite:///{home}/gpufabric.db")
    cfg = parse_segments()
    act = Actions(store, lambda: cfg)
    act.import_inventory(LOCAL_ADMIN, inventory_from_dict(_inventory()))
    for t in ("infra", "alpha", "beta", "gamma", "delta"):
        act.create_tenant(LOCAL_ADMIN, t)
    now = datetime.now(UTC)

    def lease(tenant: str, node: str, offering: str = "baremetal") -> None:  # as a finished grant leaves them
        store.create_lease(Lease(tenant, node, now, None, (), offering=offering))
        store.set_node_state(node, NodeState.LEASED)

    lease("infra", "gpu-h01", "vm-host")
    for tenant, mods in SLOTS.items():  # the slots as the slot workflow carves them
        store.upsert_inventory(Inventory((Node(slot_name("gpu-h01", mods), host="gpu-h01", slot_modules=mods),)))
        if tenant:
            lease(tenant, slot_name("gpu-h01", mods))
    lease("delta", "gpu-h02")
    tokens = {
        "admin": act.create_token(LOCAL_ADMIN, "ops", "admin", None)[1],
        "alpha": act.create_token(LOCAL_ADMIN, "alpha-user", "lessee", "alpha")[1],
    }
    kinds = [k.bind("ethernet", UPLINKS) if k.name == "ethernet" else k for k in registered_kinds()]
    ctx = ApiContext(store, lambda: cfg, view_kinds=lambda: kinds)
    with live_api(ctx) as base:
        yield {"base": base, "tokens": tokens}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        yield b
        b.close()


def _signed_in(browser: Any, served: dict[str, Any], who: str, errors: list[str]) -> Any:
    pg = browser.new_page(viewport={"width": 1366, "height": 900})
    # a script error or a CSP refusal (an HTTP error is an answer the page expects: no audit yet, no DPU)
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" and not m.text.startswith(ANSWERED) else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(served["base"] + "/")
    pg.get_by_label("API token").fill(served["tokens"][who])
    pg.get_by_role("button", name="Sign in").click()
    pg.wait_for_selector("#boards svg.board[data-node='gpu-h01']")
    return pg


@pytest.fixture(scope="module")
def page(browser: Any, served: dict[str, Any]) -> Iterator[Any]:
    errors: list[str] = []
    pg = _signed_in(browser, served, "admin", errors)
    pg.wait_for_selector("#fabrics svg.fabric")
    yield pg
    assert errors == []


def _fill(page: Any, selector: str) -> list[str]:
    """The computed fill of every element ``selector`` matches."""
    return list(page.eval_on_selector_all(selector, "els => els.map(e => getComputedStyle(e).fill)"))


def _legend(page: Any) -> dict[str, str]:
    """The drawings' legend: tenant -> its swatch's computed background colour (quarantine: its class's fill)."""
    got = page.eval_on_selector_all(
        "#draw-legend [data-tenant]", "els => els.map(e => [e.dataset.tenant, getComputedStyle(e).backgroundColor])"
    )
    return dict(got)


def test_the_boards_colour_each_slot_by_its_tenant(page: Any, tmp_path: Path) -> None:
    legend = _legend(page)
    assert {"alpha", "beta", "gamma", "delta", "infra", "quarantine"} <= legend.keys()
    tenants = ("alpha", "beta", "gamma", "delta", "infra")
    assert len({legend[t] for t in tenants}) == len(tenants)  # a colour each
    board = "#boards svg.board[data-node='gpu-h01']"
    assert page.locator("#boards svg.board").count() == 3  # one board per host, none for the slots themselves
    for tenant, mods in SLOTS.items():
        slot = slot_name("gpu-h01", mods)
        for m in mods:
            cell = page.locator(f"{board} g.gpu[data-module='{m}']")
            title = cell.locator("title").text_content() or ""
            rect = f"{board} g.gpu[data-module='{m}'] rect"
            if tenant:
                assert cell.get_attribute("data-tenant") == tenant and cell.get_attribute("data-unit") == slot
                assert f"slot {slot}" in title and f"tenant {tenant}" in title, title
                assert _fill(page, rect) == [legend[tenant]]  # the tenant's colour of the legend
            else:  # the idle slot's GPU: quarantine, grey
                assert cell.get_attribute("data-tenant") == "quarantine" and "quarantine" in title, title
                assert _fill(page, rect) == ["rgb(214, 214, 214)"]
    bars = {
        b.get_attribute("data-unit"): b.get_attribute("data-tenant") for b in page.locator(f"{board} g.slot-bar").all()
    }
    assert bars == {slot_name("gpu-h01", m): t or "quarantine" for t, m in SLOTS.items()}
    # the whole-node lease: board and every GPU in delta's colour; the host in quarantine: grey
    whole = "#boards svg.board[data-node='gpu-h02']"
    assert _fill(page, f"{whole} rect.board-frame") == [legend["delta"]]
    assert set(_fill(page, f"{whole} g.gpu rect")) == {legend["delta"]} and page.locator(f"{whole} g.gpu").count() == 8
    assert set(_fill(page, "#boards svg.board[data-node='gpu-h03'] g.gpu rect")) == {"rgb(214, 214, 214)"}
    rails, vms = page.locator(f"{board} g.rail"), page.locator(f"{board} g.vmport")
    assert rails.count() == (8 if RAILS else 0) and vms.count() == (8 if VM_PORTS else 0)
    if RAILS:  # each GPU's rail HCA in the colour of the slot holding the GPU
        assert _fill(page, f"{board} g.rail[data-module='5'] rect") == [legend["beta"]]
        title = page.locator(f"{board} g.rail[data-module='5'] title").text_content() or ""
        assert "mlx5_4" in title and "slot gpu-h01.s5x2" in title and "tenant beta" in title, title
        assert _fill(page, f"{board} g.rail[data-module='8'] rect") == ["rgb(214, 214, 214)"]
    if VM_PORTS:
        assert _fill(page, f"{board} g.vmport[data-module='7'] rect") == [legend["gamma"]]
    page.locator("#boards").screenshot(path=str(tmp_path / "hosts.png"))
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
    assert (tmp_path / "hosts.png").stat().st_size > 5000


def test_the_fabric_drawings_hold_the_paths_switches_and_hosts_by_tenant(page: Any, tmp_path: Path) -> None:
    legend = _legend(page)
    kinds = [f.get_attribute("data-kind") for f in page.locator("#fabrics svg.fabric").all()]
    assert kinds == ["ethernet", "infiniband"]
    for kind, prefix in (("ethernet", ""), ("infiniband", "ib-")):
        fab = f"#fabrics svg.fabric[data-kind='{kind}']"
        tiers = {
            s.get_attribute("data-switch"): s.get_attribute("data-tier") for s in page.locator(f"{fab} g.switch").all()
        }
        assert tiers == {
            f"{prefix}leaf-1": "leaf",
            f"{prefix}leaf-2": "leaf",
            f"{prefix}spine-1": "spine",
            f"{prefix}spine-2": "spine",
        }  # no hypervisor OVS among them
        links = {
            (ln.get_attribute("data-from"), ln.get_attribute("data-to")) for ln in page.locator(f"{fab} line").all()
        }
        assert {(h, f"{prefix}leaf-1") for h in ("gpu-h01", "gpu-h02")} | {("gpu-h03", f"{prefix}leaf-2")} <= links
        assert {(f"{prefix}leaf-{i}", f"{prefix}spine-{j}") for i in (1, 2) for j in (1, 2)} <= links
        assert [h.get_attribute("data-node") for h in page.locator(f"{fab} g.fabric-host").all()] == list(HOSTS)
        assert _fill(page, f"{fab} g.fabric-host[data-node='gpu-h02'] rect") == [legend["delta"]]
        stripes = page.locator(f"{fab} g.fabric-host[data-node='gpu-h01'] rect.stripe")
        got = [s.get_attribute("data-tenant") for s in stripes.all()]
        assert got == ["alpha"] * 4 + ["beta"] * 2 + ["gamma", "quarantine"]  # split into its slots' colours
        want = [legend[t] if t != "quarantine" else "rgb(214, 214, 214)" for t in got]
        assert _fill(page, f"{fab} g.fabric-host[data-node='gpu-h01'] rect.stripe") == want
        # a switch sits above its hosts: spines over leaves over hosts
        y = {s: float(page.locator(f"{fab} g.switch[data-switch='{s}'] rect").get_attribute("y") or 0)
             for s in tiers}  # fmt: skip
        host_y = float(page.locator(f"{fab} g.fabric-host rect").first.get_attribute("y") or 0)
        assert y[f"{prefix}spine-1"] < y[f"{prefix}leaf-1"] < host_y
    page.locator("#fabrics").screenshot(path=str(tmp_path / "fabric.png"))
    assert (tmp_path / "fabric.png").stat().st_size > 5000
    assert (tmp_path / "fabric.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_lessee_sees_a_board_of_only_its_own_slot(browser: Any, served: dict[str, Any], tmp_path: Path) -> None:
    errors: list[str] = []
    page = _signed_in(browser, served, "alpha", errors)
    boards = [b.get_attribute("data-node") for b in page.locator("#boards svg.board").all()]
    assert boards == ["gpu-h01"]  # the host it cannot see, drawn from its slot
    cells = page.locator("#boards g.gpu")
    assert [c.get_attribute("data-module") for c in cells.all()] == ["1", "2", "3", "4"]
    assert {c.get_attribute("data-tenant") for c in cells.all()} == {"alpha"}
    assert page.locator("#boards .board-tenant").text_content() == "your slots"
    assert page.locator("#boards g.rail, #boards g.vmport").count() == 0  # the host's ports are not its to see
    page.locator("#boards").screenshot(path=str(tmp_path / "lessee.png"))
    assert errors == []
