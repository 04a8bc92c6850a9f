"""``gpufabric serve`` with TLS: a self-signed certificate, HTTPS on loopback, health and a
token-authenticated v1 call; and a non-loopback bind refused without TLS and tokens."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

GF = str(Path(sys.executable).parent / "gpufabric")


def test_https_serve_and_bind_refusal(tmp_path: Path) -> None:
    if subprocess.run(["which", "openssl"], capture_output=True, check=False).returncode != 0:
        pytest.fail("openssl is needed to make the test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
        capture_output=True, check=True,
    )  # fmt: skip
    env = {**os.environ, "GPUFABRIC_HOME": str(tmp_path / "home"), "GPUFABRIC_DB": ""}
    refused = subprocess.run([GF, "serve", "--host", "0.0.0.0", "--tls-cert", str(cert), "--tls-key", str(key)],
                             env=env, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2 and "until an API token exists" in refused.stderr
    token = json.loads(subprocess.run([GF, "token", "create", "--role", "admin", "--json"], env=env,
                                      capture_output=True, text=True, check=True).stdout)["secret"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([GF, "serve", "--port", str(port), "--tls-cert", str(cert), "--tls-key", str(key)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"https://127.0.0.1:{port}"
        ctx = ssl.create_default_context(cafile=str(cert))
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(f"{base}/healthz", verify=ctx, timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert r.json()["status"] == "ok"
        nodes = httpx.get(f"{base}/api/v1/nodes", verify=ctx, headers={"Authorization": f"Bearer {token}"})
        assert nodes.status_code == 200 and nodes.json()["total"] == 0
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)  # no plain HTTP beside it
    finally:
        proc.terminate()
        proc.wait(timeout=30)
