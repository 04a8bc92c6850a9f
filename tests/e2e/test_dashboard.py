"""The web dashboard in headless Chromium (Debian ``chromium`` driven by playwright, no
browser download) against ``gpufabric serve`` on the lab: sign in with a token, the fabric
map of the lab, a move started from the page whose phases complete live, an injected drift
shown as a violation with a drill-down to the port, and a lessee's view of only its nodes.
Each test saves a screenshot under its tmp_path."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpufabric.lab.serve import serving

from e2e.conftest import LabEnv

pytestmark = pytest.mark.root
LAB_DPUS = 2  # gpu-a01 and gpu-a02 get a DPU: the map shows its role
playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def served(lab: LabEnv) -> Iterator[dict[str, Any]]:
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium (scripts/setup.sh installs it)")
    tokens = {
        "admin": lab.gfj("token", "create", "--role", "admin")["secret"],
        "alpha": lab.gfj("token", "create", "--role", "lessee", "--tenant", "alpha")["secret"],
    }
    with serving(lab.env, "--interval", "2", "--policy", "report", "--window", "0.1", "--worker-poll", "0.5") as srv:
        yield {"base": srv.base, "tokens": tokens, "proc": srv.proc}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        yield b
        b.close()


def _signed_in(browser: Any, served: dict[str, Any], who: str) -> Any:
    page = browser.new_page(viewport={"width": 1366, "height": 800})
    page.goto(served["base"] + "/")
    page.get_by_label("API token").fill(served["tokens"][who])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("#map tbody tr")
    return page


def _cells(page: Any, node: str) -> dict[str, str]:
    """The fabric cells of ``node``'s row on the map: fabric -> its text."""
    row = page.locator(f"#map tr[data-node='{node}']")
    return {td.get_attribute("data-fabric"): td.inner_text().strip() for td in row.locator("td[data-fabric]").all()}


def test_sign_in_and_see_the_fabric_map(lab: LabEnv, browser: Any, served: dict[str, Any], tmp_path: Path) -> None:
    page = browser.new_page()
    page.goto(served["base"] + "/")
    page.get_by_label("API token").fill("gf_not-a-token")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("#signin-error:has-text('not valid')")
    page = _signed_in(browser, served, "admin")
    nodes = [r.get_attribute("data-node") for r in page.locator("#map tbody tr").all()]
    assert nodes == ["gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04"]
    heads = [h.inner_text() for h in page.locator("#map thead th").all()]
    assert heads == ["Node", "Tenant", "State", "ethernet", "infiniband", "dpu", "nvlink"]  # every fabric's column
    first = page.locator("#map tbody tr").first
    assert first.locator(".port").count() == 4  # one Ethernet port, one HCA port, its DPU and its GPUs
    assert "quarantine" in first.locator(".badge").inner_text()
    cells = _cells(page, "gpu-a01")
    assert cells["ethernet"].endswith("/" + lab.eth_ports("gpu-a01")[0])
    assert cells["infiniband"] == f"mlx5_0/1 {lab.guids('gpu-a01')[0]}"
    assert cells["nvlink"] == "0/8 GPUs"  # quarantine: no partition
    assert cells["dpu"].split()[1] == "none" and cells["dpu"].startswith("bf")
    assert _cells(page, "gpu-a03")["dpu"] == "-"  # no DPU
    page.screenshot(path=str(tmp_path / "map.png"), full_page=True)


def test_start_a_move_and_watch_its_phases_complete(browser: Any, served: dict[str, Any], tmp_path: Path) -> None:
    page = _signed_in(browser, served, "admin")
    page.get_by_label("Node").select_option("gpu-a01")
    page.get_by_label("To tenant").select_option("alpha")
    page.get_by_role("button", name="Start move").click()
    move = page.locator("[data-move]").first
    seen: set[str] = set()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        status = move.get_attribute("data-status") or ""
        seen.add(status)
        if status in ("done", "failed"):
            break
        time.sleep(0.05)
    page.screenshot(path=str(tmp_path / "move.png"), full_page=True)
    assert move.get_attribute("data-status") == "done", move.inner_text()
    assert seen & {"pending", "running"}, "the page showed the move before it finished"
    assert move.locator(".phase.complete").count() == 4
    page.wait_for_selector("#map tr[data-node='gpu-a01'] .badge:has-text('alpha')")


def test_the_map_shows_the_nvlink_partition_and_dpu_role_of_a_lease(
    lab: LabEnv, browser: Any, served: dict[str, Any], tmp_path: Path
) -> None:
    lab.gf("lease", "create", "--tenant", "beta", "--node", "gpu-a02", "--offering", "openshift", "--gpus", "4")
    page = _signed_in(browser, served, "admin")
    page.wait_for_selector("#map tr[data-node='gpu-a02'] .badge:has-text('beta')")
    cells = _cells(page, "gpu-a02")
    assert cells["nvlink"] == "4/8 GPUs"  # the lease's partition of 4 of the node's 8 GPUs
    assert cells["dpu"].endswith(" dpu-host")  # OpenShift: OVN-Kubernetes split across host and DPU
    assert _cells(page, "gpu-a01")["nvlink"] == "8/8 GPUs" and _cells(page, "gpu-a01")["dpu"].endswith(" none")
    listed = {n["name"]: n["fabrics"] for n in lab.gfj("node", "list")}  # the CLI's cells are the same
    assert listed["gpu-a02"]["nvlink"]["summary"] == "4/8 GPUs" and listed["gpu-a02"]["nvlink"]["partition_gpus"] == 4
    assert listed["gpu-a02"]["dpu"]["dpus"][0]["role"] == "dpu-host"
    page.screenshot(path=str(tmp_path / "fabrics.png"), full_page=True)


def test_injected_drift_appears_as_a_violation_with_drill_down(
    lab: LabEnv, browser: Any, served: dict[str, Any], tmp_path: Path
) -> None:
    port = lab.eth_ports("gpu-a03")[0]
    nets = {n["tenant"]: n for n in lab.gfj("network", "list")}
    beta_vlan = next(s["vlan"] for s in nets["beta"]["segments"] if s["fabric"] == "ethernet")
    lab.ovs_set_tag(port, beta_vlan)  # a quarantined node's port put on beta's VLAN behind gpufabric's back
    try:
        page = _signed_in(browser, served, "admin")
        page.get_by_role("button", name="Run audit now").click()
        row = page.locator("#violations tbody tr", has_text="gpu-a03").first
        row.wait_for(timeout=30_000)
        row.locator("a.drill").click()
        cell = page.locator(".port.focus")
        cell.first.wait_for(timeout=10_000)  # the map is rendered after the audit panel
        assert cell.count() == 1 and "drift" in (cell.get_attribute("class") or "")
        assert "gpu-a03" in (cell.get_attribute("title") or "")
        page.screenshot(path=str(tmp_path / "drift.png"), full_page=True)
    finally:
        lab.gf("reconcile", "--once", "--policy", "repair")


def test_a_lessee_sees_only_its_nodes(browser: Any, served: dict[str, Any], tmp_path: Path) -> None:
    page = _signed_in(browser, served, "alpha")
    page.wait_for_selector("#who:has-text('tenant')")
    nodes = [r.get_attribute("data-node") for r in page.locator("#map tbody tr").all()]
    assert nodes == ["gpu-a01"]  # moved to alpha by the move test
    assert page.locator("#move-form").is_hidden() and page.locator("#audit-tools").is_hidden()
    assert {t.inner_text() for t in page.locator("#leases tbody td:nth-child(3)").all()} == {"alpha"}
    page.screenshot(path=str(tmp_path / "lessee.png"), full_page=True)
