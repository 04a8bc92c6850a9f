"""Install as an operator would: build the wheel, install it into a fresh venv, run the shipped
systemd unit's ExecStart line (specifiers, Environment= and LoadCredential= as systemd resolves
them) against a small store, and check /healthz, /readyz and a token-authenticated read over TLS.

The fresh venv is made ``--without-pip`` and never sees the source tree or the dev venv's
gpufabric: the wheel is installed ``--no-deps`` and the third-party packages come from a
directory of links to the dev venv's (every ``gpufabric*`` / ``__editable__*`` entry left out);
``pip check`` proves they satisfy the wheel's requirements. ``GPUFABRIC_WHEEL_FULL_INSTALL=1``
resolves and installs the dependencies from the package index instead (~2-3 min here).
Also: ``systemd-analyze`` verifies the unit and scores its exposure offline.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import ssl
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
UNIT_FILE = REPO / "src" / "gpufabric" / "deploy" / "gpufabric-serve.service"
DEV_PIP = [sys.executable, "-m", "pip"]
INSTALL_PREFIX = "/opt/gpufabric/"  # where the unit expects the venv (docs/deploy.md)
EXPOSURE_MAX = 2.0  # systemd-analyze security: 0 (locked down) .. 10 (unsafe); "OK" is below 4.5


# ------------------------------------------------------------------------------ a unit file, parsed
@dataclass(frozen=True)
class Unit:
    service: tuple[tuple[str, str], ...]  # (key, value) of [Service], in order, repeats kept

    @classmethod
    def parse(cls, text: str) -> Unit:
        section, out = "", []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            if section == "Service":
                out.append((key.strip(), value.strip()))
        return cls(tuple(out))

    def values(self, key: str) -> list[str]:
        return [v for k, v in self.service if k == key]

    def one(self, key: str) -> str:
        vs = self.values(key)
        assert len(vs) == 1, f"{key}: {vs}"
        return vs[0]


def specifiers(value: str, spec: dict[str, str]) -> str:
    """systemd's %-specifiers (the ones the unit uses; %% is a literal %)."""
    return re.sub(r"%(.)", lambda m: "%" if m.group(1) == "%" else spec[m.group(1)], value)


def environment(unit: Unit, spec: dict[str, str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for v in unit.values("Environment"):
        for assignment in shlex.split(specifiers(v, spec)):
            k, _, val = assignment.partition("=")
            env[k] = val
    return env


def exec_start(unit: Unit, spec: dict[str, str], env: dict[str, str]) -> list[str]:
    """ExecStart as systemd runs it: specifiers, then ``${VAR}`` inside a word and ``$VAR`` as a
    whole word, from the unit's environment."""
    words = shlex.split(specifiers(unit.one("ExecStart"), spec))
    out: list[str] = []
    for w in words:
        if re.fullmatch(r"\$[A-Za-z_][A-Za-z0-9_]*", w):
            out.extend(env[w[1:]].split())
            continue
        out.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env[m.group(1)], w))
    return out


# ------------------------------------------------------------------------------ wheel + fresh venv
@dataclass(frozen=True)
class Installed:
    root: Path
    venv: Path
    wheel: Path
    timings: dict[str, float]

    @property
    def gf(self) -> str:
        return str(self.venv / "bin" / "gpufabric")


def _run(args: list[str], timeout: float = 600, **kw: object) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False, **kw)  # type: ignore[call-overload]
    assert p.returncode == 0, f"{shlex.join(args)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p


def _deps_dir(target: Path) -> Path:
    """Links to the dev venv's third-party packages, none of gpufabric's own files among them."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()))
    target.mkdir()
    for entry in site.iterdir():
        n = entry.name.lower()
        if n.startswith(("gpufabric", "__editable__", "_gpufabric")) or n.endswith(".pth") or n == "__pycache__":
            continue
        (target / entry.name).symlink_to(entry)
    return target


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    t: dict[str, float] = {}
    t0 = time.monotonic()
    src = root / "src-copy"  # build out of tree: the worktree gets no build/ or egg-info
    src.mkdir()
    shutil.copy(REPO / "pyproject.toml", src)
    shutil.copy(REPO / "README.md", src)
    shutil.copytree(REPO / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = root / "dist"
    _run([*DEV_PIP, "wheel", "--no-deps", "-q", "-w", str(dist), str(src)])
    wheels = list(dist.glob("gpufabric-*.whl"))
    assert len(wheels) == 1, wheels
    t["build_wheel_s"] = time.monotonic() - t0

    t1 = time.monotonic()
    venv = root / "venv"
    full = os.environ.get("GPUFABRIC_WHEEL_FULL_INSTALL") == "1"
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", *([] if full else ["--without-pip"]), str(venv)])
    if full:
        _run([str(venv / "bin" / "pip"), "install", "-q", str(wheels[0])], timeout=1800)
    else:
        vsite = next((venv / "lib").glob("python3*/site-packages"))
        (vsite / "_gpufabric_test_deps.pth").write_text(str(_deps_dir(root / "deps")) + "\n")
        _run([*DEV_PIP, "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps", str(wheels[0])])
    t["install_s"] = time.monotonic() - t1
    return Installed(root, venv, wheels[0], t)


def test_the_wheel_ships_the_unit_migrations_and_dashboard(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert "gpufabric/deploy/gpufabric-serve.service" in names
    versions = sorted(p.name for p in (REPO / "src/gpufabric/store/migrations/versions").glob("[0-9]*.py"))
    assert versions and {f"gpufabric/store/migrations/versions/{v}" for v in versions} <= names
    assert {"gpufabric/api/static/index.html", "gpufabric/store/migrations/env.py"} <= names


def test_fresh_venv_runs_the_units_exec_start(installed: Installed, tmp_path: Path) -> None:
    t0 = time.monotonic()
    py = str(installed.venv / "bin" / "python")
    where = _run([py, "-c", "import gpufabric, sys; print(gpufabric.__file__); print(sys.prefix)"]).stdout.split()
    assert where[0].startswith(str(installed.venv)), where  # the wheel's copy, not the source tree
    _run([*DEV_PIP, "--python", py, "check"])  # every requirement of the wheel is satisfied
    helped = _run([installed.gf, "--help"]).stdout
    for cmd in ("serve", "store", "deploy", "token", "inventory"):
        assert re.search(rf"^\W*{cmd}\b", helped, re.M), f"{cmd} missing from --help:\n{helped}"
    shipped = _run([installed.gf, "deploy", "unit"]).stdout
    assert shipped == UNIT_FILE.read_text()
    assert json.loads(_run([installed.gf, "deploy", "unit", "--json"]).stdout) == {"name": UNIT_FILE.name, "text": shipped}

    # systemd's view of the paths: %S = /var/lib, %E = /etc, %d = the unit's credentials directory
    unit = Unit.parse(shipped)
    state, etc, creds = tmp_path / "var-lib", tmp_path / "etc", tmp_path / "credentials"
    spec = {"S": str(state), "E": str(etc), "d": str(creds)}
    (state / unit.one("StateDirectory")).mkdir(parents=True, mode=0o700)
    (etc / unit.one("ConfigurationDirectory")).mkdir(parents=True)
    creds.mkdir(mode=0o700)
    cert, key = creds / "tls.crt", creds / "tls.key"
    _run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
          "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"])  # fmt: skip
    loaded = {v.split(":", 1)[0] for v in unit.values("LoadCredential")}
    assert loaded == {"tls.crt", "tls.key"}
    for f in (cert, key):
        f.chmod(0o400)  # as systemd hands credentials over

    env_unit = environment(unit, spec)
    assert env_unit["GPUFABRIC_HOME"] == str(state / "gpufabric")
    with socket.socket() as s:  # the one setting changed: another port than 8480 (shared machine)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env_unit["GPUFABRIC_PORT"] = str(port)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **env_unit}
    argv = exec_start(unit, spec, env_unit)
    assert argv[0].startswith(INSTALL_PREFIX) and argv[1] == "serve", argv
    argv[0] = str(installed.venv / argv[0][len(INSTALL_PREFIX):])
    assert "--host" in argv and argv[argv.index("--host") + 1] == "0.0.0.0"  # off loopback: TLS + token enforced

    refused = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2 and "until an API token exists" in refused.stderr, refused.stderr
    _run([installed.gf, "inventory", "import", str(REPO / "examples" / "inventory.yaml")], env=env)
    token = json.loads(_run([installed.gf, "token", "create", "--role", "admin", "--json"], env=env).stdout)["secret"]
    db = state / "gpufabric" / "gpufabric.db"
    assert db.stat().st_mode & 0o777 == 0o600 and (state / "gpufabric").stat().st_mode & 0o777 == 0o700

    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ctx = ssl.create_default_context(cafile=str(cert))
        base = f"https://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"serve exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            try:
                health = httpx.get(f"{base}/healthz", verify=ctx, timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "serve did not answer /healthz within 60 s"
                time.sleep(0.2)
        up_s = time.monotonic() - started
        assert health.status_code == 200 and health.json()["status"] == "ok"
        ready = httpx.get(f"{base}/readyz", verify=ctx, timeout=5)
        assert ready.status_code == 200 and ready.json()["status"] == "ok", ready.text
        assert httpx.get(f"{base}/api/v1/nodes", verify=ctx, timeout=5).status_code == 401
        nodes = httpx.get(f"{base}/api/v1/nodes", verify=ctx, timeout=5, headers={"Authorization": f"Bearer {token}"})
        assert nodes.status_code == 200 and nodes.json()["total"] == 3
        assert httpx.get(f"{base}/metrics", verify=ctx, timeout=5).status_code == 401  # an admin's only
        metrics = httpx.get(f"{base}/metrics", verify=ctx, timeout=5, headers={"Authorization": f"Bearer {token}"})
        assert metrics.status_code == 200 and "gpufabric_" in metrics.text
        status = Path(f"/proc/{proc.pid}/status").read_text()
        rss_mb = int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    timings = {**installed.timings, "serve_up_s": up_s, "checks_s": time.monotonic() - t0, "serve_rss_mb": rss_mb,
               "load1": os.getloadavg()[0]}
    print("wheel install timings:", json.dumps({k: round(v, 2) for k, v in timings.items()}))
    assert proc.returncode in (0, -15)  # SIGTERM: a clean stop


def _exposure(path: Path) -> float:
    p = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(path)], capture_output=True, text=True,
                       timeout=60, check=False)  # fmt: skip
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", p.stdout + p.stderr)
    assert m, p.stdout[-1000:] + p.stderr[-1000:]
    return float(m.group(1))


def test_systemd_verifies_the_unit_and_scores_it_hardened(installed: Installed, tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze (Debian package systemd) is needed to check the unit")
    text = UNIT_FILE.read_text()
    unit = Unit.parse(text)
    assert unit.one("User") not in ("root", "nobody", "0") and unit.one("NoNewPrivileges") == "yes"
    assert unit.one("ProtectSystem") == "strict" and unit.one("PrivateTmp") == "yes"
    assert unit.one("CapabilityBoundingSet") == ""
    assert not re.search(r"password|secret|token=", " ".join(unit.values("Environment")), re.I)
    local = tmp_path / "gpufabric-serve.service"  # verify wants the ExecStart binary to exist
    local.write_text(text.replace(INSTALL_PREFIX, str(installed.venv) + "/"))
    v = subprocess.run(["systemd-analyze", "verify", "--man=no", str(local)], capture_output=True, text=True,
                       timeout=60, check=False)  # fmt: skip
    assert v.returncode == 0 and not v.stderr.strip(), v.stderr
    hardened = _exposure(local)
    bare = tmp_path / "bare.service"  # the same service without the hardening block: the score is real
    bare.write_text(f"[Service]\nUser=gpufabric\nExecStart={installed.gf} serve\n")
    assert hardened <= EXPOSURE_MAX < _exposure(bare), (hardened, _exposure(bare))
