"""A rendered hardened opensm.conf on the real OpenSM 3.3.23 over ibsim.

Starts its own ibsim (unique IBSIM_SOCKNAME) and OpenSM in a temp dir and stops them.
Checks OpenSM accepts every hardened setting (``-F``), reaches SUBNET UP without errors
and is master at priority 15. It also pins what ibsim does with M_Key: nothing — the
ports report ProtectBits 0 although OpenSM runs with m_key_protection_level 2, so M_Key
*protection* cannot be tested here (see shared/notes/ibsim-opensm.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gpufabric.fabrics.infiniband.audit.hardening import (
    SETTINGS_UNREADABLE,
    HardeningPolicy,
    check_hardening,
    check_keys,
    parse_opensm_conf,
    render_opensm_conf_overrides,
)
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMDriver

pytestmark = pytest.mark.root

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
POLICY = HardeningPolicy(sm_key=0x5EC2E7C0FFEE0001, sa_key=0x5A5A5A5A00C0FFEE, m_key=0x3C3C3C3CDEADBEEF,
                         cc_key=0xCC00CC00CC00CC01)  # fmt: skip
NET = """Switch 8 "leaf-1"
[1] "sm-node mlx5_0"[1]
[2] "gpu-a01 mlx5_0"[1]
[3] "gpu-a02 mlx5_0"[1]

Hca 1 "sm-node mlx5_0"
[1] "leaf-1"[1]

Hca 1 "gpu-a01 mlx5_0"
[1] "leaf-1"[2]

Hca 1 "gpu-a02 mlx5_0"
[1] "leaf-1"[3]
"""


def _wait_for(path: Path, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text(errors="replace") if path.exists() else ""
        if text in content:
            return content
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in {path} after {timeout}s:\n{content[-2000:]}")


def _stop(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


class Lab:
    def __init__(self, root: Path, sockname: str) -> None:
        self.root = root
        self.env = {**os.environ, "IBSIM_SOCKNAME": sockname}
        self.client_env = {**self.env, "LD_PRELOAD": UMAD2SIM}
        self.scratch = root / "scratch"
        self.scratch.mkdir()

    def client(self, *args: str) -> str:
        p = subprocess.run(
            list(args), env=self.client_env, cwd=self.scratch, capture_output=True, text=True, timeout=30
        )
        assert p.returncode == 0, f"{args}: {p.stderr}"
        return p.stdout


@pytest.fixture
def hardened_opensm(tmp_path: Path) -> Iterator[tuple[Lab, str, str]]:
    # force_log_flush only so the test can read the log while OpenSM runs
    with _opensm(tmp_path, render_opensm_conf_overrides(POLICY) + "force_log_flush TRUE\n") as got:
        yield got


@contextmanager
def _opensm(tmp_path: Path, conf_text: str) -> Iterator[tuple[Lab, str, str]]:
    lab = Lab(tmp_path, f"gfhard-{uuid.uuid4().hex[:10]}")
    (tmp_path / "net").write_text(NET)
    conf = tmp_path / "opensm.conf"
    conf.write_text(conf_text)
    conf.chmod(0o600)
    (tmp_path / "partitions.conf").write_text("Default=0x7fff, ipoib : ALL=full ;\n")
    osm_tmp = tmp_path / "osm"
    osm_tmp.mkdir()
    ibsim_log = tmp_path / "ibsim.log"
    with ibsim_log.open("wb") as out:
        ibsim = subprocess.Popen(
            ["ibsim", "-s", "net"], cwd=tmp_path, env=lab.env, stdout=out, stderr=subprocess.STDOUT
        )
    osm: subprocess.Popen[bytes] | None = None
    try:
        _wait_for(ibsim_log, "Network simulator ready.", 15)
        osm_env = {**lab.client_env, "OSM_TMP_DIR": str(osm_tmp), "OSM_CACHE_DIR": str(osm_tmp)}
        osm_out = tmp_path / "opensm.out"
        log = tmp_path / "opensm.log"
        with osm_out.open("wb") as out:
            osm = subprocess.Popen(
                ["opensm", "-F", str(conf), "-P", str(tmp_path / "partitions.conf"), "-f", str(log), "-s", "0"],
                cwd=lab.scratch,
                env=osm_env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        log_text = _wait_for(log, "SUBNET UP", 30)
        yield lab, osm_out.read_text(errors="replace"), log_text
    finally:
        if osm is not None:
            _stop(osm)  # OpenSM first: it hangs on exit when ibsim is already gone
        _stop(ibsim)


def test_opensm_accepts_hardened_conf(hardened_opensm: tuple[Lab, str, str]) -> None:
    lab, out, log = hardened_opensm
    # OpenSM echoes every non-default option it loaded from -F
    for line in (
        "Loading Cached Option:sm_priority = 15",
        "Loading Cached Option:sm_key = 0x5ec2e7c0ffee0001",
        "Loading Cached Option:sa_key = 0x5a5a5a5a00c0ffee",
        "Loading Cached Option:m_key = 0x3c3c3c3cdeadbeef",
        "Loading Cached Option:m_key_protection_level = 2",
        "Loading Cached Option:m_key_lease_period = 0x012c",
        "Loading Cached Option:cc_key = 0xcc00cc00cc00cc01",
    ):
        assert line in out
    # protected M_Key leases need a live SM: OpenSM overrides "-s 0" to lease - 1
    assert "re-enabling sweeping with interval 299" in out
    assert " ERR " not in log
    sminfo = lab.client("sminfo")
    assert re.search(r"priority 15 state 3 SMINFO_MASTER", sminfo), sminfo
    # what we rendered is what we check as hardened (CC_Key included)
    assert check_hardening(parse_opensm_conf(render_opensm_conf_overrides(POLICY))) == []
    assert check_keys(parse_opensm_conf(render_opensm_conf_overrides(POLICY))) == []


def test_ibsim_does_not_implement_m_key(hardened_opensm: tuple[Lab, str, str]) -> None:
    lab, _out, _log = hardened_opensm
    ca_lids = [int(m) for m in re.findall(r"^CA\s+(\d+)\s+1\s", lab.client("ibnetdiscover", "-p"), re.M)]
    assert len(ca_lids) == 3
    portinfo = lab.client("smpquery", "portinfo", str(ca_lids[0]), "1")
    # a real HCA would report ProtectBits 2 after OpenSM set level 2; ibsim keeps 0
    assert re.search(r"^ProtectBits:\.+0$", portinfo, re.M), portinfo


def _driver(lab: Lab, tmp_path: Path, conf: Path, **keys: str) -> OpenSMDriver:
    return OpenSMDriver(
        partitions_conf=str(tmp_path / "partitions.conf"),
        log_path=str(tmp_path / "opensm.log"),
        opensm_conf=str(conf),
        diag_env={"IBSIM_SOCKNAME": lab.env["IBSIM_SOCKNAME"], "LD_PRELOAD": UMAD2SIM},
        diag_cwd=str(lab.scratch),
        reader="smpquery",
        **keys,
    )


def _key_file(path: Path, key: int) -> str:
    path.write_text(f"0x{key:016x}\n")
    path.chmod(0o600)
    return str(path)


def _ib_keys(tmp_path: Path, lab: Lab, keys: dict[str, str]) -> dict[str, Any]:
    """``gpufabric ib keys --json`` (the installed CLI) over a fabrics.yaml driving this SM."""
    from support.live_api import gf

    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    options = {"partitions_conf": str(tmp_path / "partitions.conf"), "log_path": str(tmp_path / "opensm.log"),
               "opensm_conf": str(tmp_path / "opensm.conf"), "diag_cwd": str(lab.scratch), "reader": "smpquery",
               "diag_env": {"IBSIM_SOCKNAME": lab.env["IBSIM_SOCKNAME"], "LD_PRELOAD": UMAD2SIM}, **keys}  # fmt: skip
    (home / "fabrics.yaml").write_text(json.dumps({"trusted_sm_guids": ["0x0002c90310000001"],
                                                  "infiniband": {"driver": "opensm", "options": options}}))  # fmt: skip
    p = gf(home, "ib", "keys", "--json", GF_TEST_SA_KEY=os.environ["GF_TEST_SA_KEY"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "c0ffee" not in p.stdout.lower() and "cc00cc00" not in p.stdout.lower()  # no key value shown
    doc: dict[str, Any] = json.loads(p.stdout)
    return doc


def test_every_ncp_key_is_audited_configured_or_unset_on_the_running_opensm(tmp_path: Path) -> None:
    """SDN04-05: the driver reads the running OpenSM's opensm.conf and the audit reports each key
    the requirement names: P_Key, M_Key, SM_Key, SA_Key and CC_Key configured on a hardened SM
    whose keys are the ones fabrics.yaml gives (m_key_file, cc_key_file, sa_key_env), no
    IB-HARDENING finding; AM_Key, VS_Key, N2N_Key and M2N_Key not supported by OpenSM 3.3.23. The
    same SM with cc_key left out and another CC_Key in fabrics.yaml: IB-HARD-CC-KEY-DIFFERS
    (HIGH), no key value in any finding."""
    from gpufabric.fabrics.infiniband.audit.hardening import OPENSM_DEFAULTS
    from gpufabric.fabrics.infiniband.audit.keys import key_states
    from gpufabric.fabrics.infiniband.kind import InfinibandKind
    from gpufabric.planning.desired import tenancy_of

    kind, t = InfinibandKind(), tenancy_of([], [], [])
    keys = {"m_key_file": _key_file(tmp_path / "m_key", POLICY.m_key), "sa_key_env": "GF_TEST_SA_KEY",
            "cc_key_file": _key_file(tmp_path / "cc_key", POLICY.cc_key or 0)}  # fmt: skip
    os.environ["GF_TEST_SA_KEY"] = f"0x{POLICY.sa_key:x}"
    try:
        with _opensm(tmp_path, render_opensm_conf_overrides(POLICY) + "force_log_flush TRUE\n") as (lab, out, _log):
            assert "Loading Cached Option:cc_key = 0xcc00cc00cc00cc01" in out  # OpenSM took it
            drv = _driver(lab, tmp_path, tmp_path / "opensm.conf", **keys)
            try:
                observed = drv.observe()
            finally:
                drv.close()
            shown = _ib_keys(tmp_path, lab, keys)
        states = {k.name: k.status for k in key_states(dict(observed.settings), OPENSM_DEFAULTS)}
        assert {k["key"]: k["status"] for k in shown["keys"]} == states, shown  # `gpufabric ib keys --json`: the same report
        assert states == {"P_Key": "configured", "M_Key": "configured", "SM_Key": "configured", "SA_Key": "configured",
                          "CC_Key": "configured", "AM_Key": "not supported", "VS_Key": "not supported",
                          "N2N_Key": "not supported", "M2N_Key": "not supported"}  # fmt: skip
        assert [v for v in kind.audit(t, kind.desired(t), observed) if v.invariant == "IB-HARDENING"] == []

        plain = render_opensm_conf_overrides(POLICY).replace(f"cc_key 0x{POLICY.cc_key:016x}\n", "")
        other = {**keys, "cc_key_file": _key_file(tmp_path / "cc_key2", 0x0BADC0DE0BADC0DE)}
        (tmp_path / "b").mkdir()
        with _opensm(tmp_path / "b", plain + "force_log_flush TRUE\n") as (lab, _o, _l):
            drv = _driver(lab, tmp_path / "b", tmp_path / "b" / "opensm.conf", **other)
            try:
                observed = drv.observe()
            finally:
                drv.close()
    finally:
        del os.environ["GF_TEST_SA_KEY"]
    found = [v for v in kind.audit(t, kind.desired(t), observed) if v.invariant == "IB-HARDENING"]
    [cc] = [v for v in found if v.resource == "setting:cc_key"]
    assert cc.severity.value == "high" and "not the key fabrics.yaml gives" in cc.message
    assert not any(k in v.message.lower() for v in found for k in ("0badc0de", "cc00cc00", "deadbeef", "c0ffee"))


WEAK = [
    ("part-enforce-off", "part_enforce off\n", {"part_enforce"}),
    ("default-sm-key", "sm_priority 15\n", {"sm_key"}),
]


@pytest.mark.parametrize(("conf_text", "weak"), [w[1:] for w in WEAK], ids=[w[0] for w in WEAK])
def test_observe_reads_opensm_conf_and_weak_settings_are_ib_hardening(
    tmp_path: Path, conf_text: str, weak: set[str]
) -> None:
    """The driver reads the running SM's opensm.conf during observe; the audit's IB-HARDENING
    names the weak setting (part_enforce off; sm_key left at its default 1)."""
    from gpufabric.fabrics.infiniband.kind import InfinibandKind
    from gpufabric.planning.desired import tenancy_of

    kind = InfinibandKind()

    with _opensm(tmp_path, conf_text + "force_log_flush TRUE\n") as (lab, _out, _log):
        drv = _driver(lab, tmp_path, tmp_path / "opensm.conf")
        try:
            observed = drv.observe()
        finally:
            drv.close()
    settings = dict(observed.settings)
    assert settings.get("force_log_flush") == "TRUE" and len(observed.tables) == 3
    t = tenancy_of([], [], [])
    found = {v.resource.removeprefix("setting:") for v in kind.audit(t, kind.desired(t), observed)}
    assert weak <= found, found


def test_unreadable_settings_are_a_finding(tmp_path: Path) -> None:
    with _opensm(tmp_path, "force_log_flush TRUE\n") as (lab, _out, _log):
        drv = _driver(lab, tmp_path, tmp_path / "missing" / "opensm.conf")
        try:
            observed = drv.observe()
        finally:
            drv.close()
    assert SETTINGS_UNREADABLE in dict(observed.settings)
    found = check_hardening(dict(observed.settings))
    assert [f.id for f in found] == ["IB-HARD-UNREADABLE"] and "missing" in found[0].observed
