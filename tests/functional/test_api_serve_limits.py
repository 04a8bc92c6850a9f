"""``gpufabric serve`` wires its limit options and the probe listener (a real process): a body
past ``--max-body`` is 413, writes past ``--write-rate`` are 429, ``/metrics`` needs an admin
token on the main port and none on ``--probe-bind``; bad values are one-line config errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from gpufabric.domain.auth import LOCAL_ADMIN
from gpufabric.lab.serve import free_port, serving
from gpufabric.store.core import Store
from gpufabric.workflow.actions import Actions

GF = str(Path(sys.executable).parent / "gpufabric")


def _home(tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    from gpufabric.store.registry import parse_segments

    with Store.open(f"sqlite:///{tmp_path}/gpufabric.db") as s:
        act = Actions(s, parse_segments)
        act.create_tenant(LOCAL_ADMIN, "alpha")
        admin = act.create_token(LOCAL_ADMIN, "ops", "admin", None)[1]
        lessee = act.create_token(LOCAL_ADMIN, "u", "lessee", "alpha")[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUFABRIC_")}
    return {**env, "GPUFABRIC_HOME": str(tmp_path)}, {"admin": admin, "lessee": lessee}


def _get_when_up(url: str, timeout: float = 30.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return httpx.get(url, timeout=30)
        except httpx.ConnectError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_serve_applies_its_limits_and_serves_probes_on_their_own_listener(tmp_path: Path) -> None:
    env, tokens = _home(tmp_path)
    probe = free_port()
    args = ("--interval", "0", "--max-body", "2048", "--write-rate", "0.1", "--write-burst", "3",
            "--probe-bind", f"127.0.0.1:{probe}")  # fmt: skip
    with serving(env, *args, ready="/healthz") as sv:
        lessee = {"Authorization": f"Bearer {tokens['lessee']}"}
        big = httpx.post(f"{sv.base}/api/v1/networks", headers=lessee, timeout=30,
                         json={"name": "n", "tenant": "alpha", "pad": "x" * 4096})  # fmt: skip
        assert big.status_code == 413 and "at most 2048 bytes" in big.json()["error"]["message"]
        made = [httpx.post(f"{sv.base}/api/v1/networks", headers=lessee, timeout=30,
                           json={"name": f"n{i}", "tenant": "alpha"}).status_code for i in range(3)]  # fmt: skip
        assert made == [201, 201, 429]  # the 413 above took one of the 3: the rate is checked before the body
        assert httpx.get(f"{sv.base}/metrics", timeout=30).status_code == 401
        admin = {"Authorization": f"Bearer {tokens['admin']}"}
        metrics = httpx.get(f"{sv.base}/metrics", headers=admin, timeout=30)
        assert metrics.status_code == 200 and "# HELP gpufabric_" in metrics.text
        opened = _get_when_up(f"http://127.0.0.1:{probe}/metrics")  # its own thread: may start a little later
        assert opened.status_code == 200 and opened.text.splitlines()[0] == metrics.text.splitlines()[0]
        assert httpx.get(f"http://127.0.0.1:{probe}/readyz", timeout=30).json()["status"] == "ok"


def test_serve_refuses_bad_limits_and_an_open_probe_listener_off_loopback(tmp_path: Path) -> None:
    env, _ = _home(tmp_path)
    for args, field in ((("--max-body", "10"), "max_body"), (("--probe-bind", "0.0.0.0:9480"), "probe_bind"),
                        (("--stream-timeout", "0"), "stream_timeout"), (("--large-bodies", "0"), "large_bodies")):  # fmt: skip
        p = subprocess.run([GF, "serve", "--port", str(free_port()), *args], env=env, capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
        assert p.returncode == 2 and field in p.stderr, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1
