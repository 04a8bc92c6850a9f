"""The dashboard's DPU offload panel in headless Chromium (Debian ``chromium`` driven by
playwright) against ``gpufabric serve`` over a real OVN lab (lab/ovn.py, userspace OVS per DPU):

* an operator sees, per tenant and node, the hw / tc / datapath flows of /api/v1/offload — the
  datapath flow count of gpu-a01 agrees with ``ovs-appctl dpctl/dump-flows`` read by the test
  (bracketing the page's read) — the table fill with the stated capacity and its source, and
  ``unknown`` for a NIC model without a stated capacity; the alert for a tenant's flows on a
  quarantined node;
* a lessee does not see the panel (the report is for operators: 403);
* without a dpu fabric the API answers 503 and the panel stays hidden."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufabric.fabrics.dpu.plan.profiles import port_mac, port_name
from gpufabric.lab.ovn import OvnLab
from gpufabric.lab.serve import serving

pytestmark = pytest.mark.root
playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]  # fmt: skip
GF = str(Path(sys.executable).parent / "gpufabric")
NODES = ["gpu-a01", "gpu-a02"]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "GPUFABRIC_HOME": str(home), "GPUFABRIC_DB": ""}


def _gf(home: Path, *args: str) -> str:
    p = subprocess.run([GF, *args], env=_env(home), capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, f"gpufabric {' '.join(args)}: {p.stdout}{p.stderr}"
    return p.stdout


def _home(root: Path, fabrics: dict[str, Any]) -> tuple[Path, dict[str, str]]:
    home = root
    home.mkdir(parents=True, exist_ok=True)
    (home / "fabrics.yaml").write_text(yaml.safe_dump(fabrics))
    models = {"gpu-a01": "BlueField-2", "gpu-a02": "BlueField-9"}  # no stated capacity for the second
    inv = {"nodes": [{"name": n, "dpus": [{"name": "bf0", "mode": "dpu", "representors": "pf0vf1",
                                           "nic_model": models[n]}]} for n in NODES]}  # fmt: skip
    (home / "inventory.yaml").write_text(yaml.safe_dump(inv))
    _gf(home, "inventory", "import", str(home / "inventory.yaml"))
    _gf(home, "tenant", "create", "acme")
    tokens = {role: json.loads(_gf(home, "token", "create", "--role", role, *extra, "--json"))["secret"]
              for role, extra in (("admin", ()), ("lessee", ("--tenant", "acme")))}  # fmt: skip
    return home, tokens


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OvnLab]:
    root = tmp_path_factory.mktemp("dashoff")
    lab = OvnLab(root / "ovn", prefix=f"gfd{os.getpid() % 1000}")
    try:
        lab.up(NODES)
        name, mac = port_name("gpu-a01", "pf0vf1"), port_mac("gpu-a01", "pf0vf1")
        subprocess.run(["ovn-nbctl", f"--db={lab.nb}", "ls-add", "gf-acme", "--", "lsp-add", "gf-acme", name, "--",
                        "lsp-set-addresses", name, f"{mac} 10.96.0.1"], check=True, capture_output=True)  # fmt: skip
        lab.add_pod("gpu-a01", "pf0vf1", name, mac, "10.96.0.1/24")  # acme's port, left on a quarantined node
        yield lab
    finally:
        lab.down()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium (scripts/setup.sh installs it)")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        yield b
        b.close()


def _signed_in(browser: Any, base: str, token: str, ready: str = "#map tbody tr") -> Any:
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(base + "/")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector(ready)
    return page


def _dump_flows(lab: OvnLab, node: str) -> int:
    out = subprocess.run(["ovs-appctl", "-t", lab.appctl_target(node), "dpctl/dump-flows", "-m"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return sum(1 for line in out.splitlines() if line.strip() and not line.startswith("flow-dump"))


def _cells(page: Any, sel: str) -> list[list[str]]:
    return [[c.inner_text().strip() for c in r.locator("th, td").all()] for r in page.locator(sel).all()]


def test_offload_panel_shows_the_report(lab: OvnLab, browser: Any, tmp_path: Path) -> None:
    section = lab.fabrics_section() | {"mst": {"verify": False},
                                       "capacity": {"BlueField-2": {"entries": 64, "source": "stated by the operator (test)"}}}  # fmt: skip
    home, tokens = _home(tmp_path / "gf", {"dpu": section})
    with serving(_env(home), "--interval", "60", "--policy", "report", "--worker-poll", "0.5") as srv:
        pod = lab.status()["pods"]["gpu-a01/pf0vf1"]
        subprocess.run(["ip", "netns", "exec", pod, "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.96.0.9"], capture_output=True)
        before = _dump_flows(lab, "gpu-a01")
        page = _signed_in(browser, srv.base, tokens["admin"])
        page.wait_for_selector("#offload-rows tbody tr")
        after = _dump_flows(lab, "gpu-a01")
        assert page.locator("#offload").is_visible() and page.locator("#offload-nav").is_visible()
        rows = _cells(page, "#offload-rows tbody tr")
        heads = ["Node", "Tenant", "HW flows", "TC flows", "Datapath flows", "HW bytes", "TC bytes", "Datapath bytes"]
        assert [h.inner_text() for h in page.locator("#offload-rows thead th").all()] == heads
        a01 = [r for r in rows if r[0] == "gpu-a01"]
        acme = next(r for r in a01 if r[1] == "acme")
        assert acme[2:4] == ["0", "0"] and int(acme[4]) >= 1  # userspace datapath: nothing in hw/tc
        assert min(before, after) <= sum(int(r[4]) for r in a01) <= max(before, after)
        assert all(r[2] == r[3] == "0" for r in rows)
        tables = {r[0]: r[1:] for r in _cells(page, "#offload-tables tbody tr")}
        assert tables["gpu-a01"] == ["BlueField-2", "0", "64", "0.0%", "stated by the operator (test)"]
        assert tables["gpu-a02"] == ["BlueField-9", "0", "unknown", "-", "no stated capacity for this NIC model"]
        alerts = page.locator("#offload-alerts li").all_inner_texts()
        assert any(a.startswith("critical: gpu-a01: ") and "of tenant 'acme' on a node owned by 'quarantine'" in a
                   for a in alerts), alerts  # fmt: skip
        page.screenshot(path=str(tmp_path / "offload.png"), full_page=True)

        lessee = _signed_in(browser, srv.base, tokens["lessee"], "#who:has-text('tenant')")  # acme has no node
        lessee.wait_for_timeout(500)
        assert lessee.locator("#offload").is_hidden() and lessee.locator("#offload-nav").is_hidden()


def test_no_dpu_fabric_503_and_no_panel(lab: OvnLab, browser: Any, tmp_path: Path) -> None:
    home, tokens = _home(tmp_path / "gf", {})
    with serving(_env(home), "--interval", "60", "--policy", "report", "--worker-poll", "0.5") as srv:
        req = urllib.request.Request(srv.base + "/api/v1/offload", headers={"Authorization": f"Bearer {tokens['admin']}"})
        with pytest.raises(urllib.error.HTTPError) as ei:
            urllib.request.urlopen(req, timeout=10)
        assert ei.value.code == 503 and "no dpu fabric is configured" in ei.value.read().decode()
        page = _signed_in(browser, srv.base, tokens["admin"])
        t0 = time.monotonic()
        page.wait_for_function("() => document.querySelector('#offload-at') !== null")
        page.wait_for_timeout(500)
        assert time.monotonic() - t0 < 30
        assert page.locator("#offload").is_hidden() and page.locator("#offload-nav").is_hidden()
        assert page.locator("#offload-rows tbody tr").count() == 0
