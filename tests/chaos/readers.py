"""The independent checker's readers (issue 35): one :class:`~chaos.checker.Sample` of the real
fabrics read with their own tools, and the public API over HTTP. Imports nothing from gpufabric.

- Ethernet: ``ovs-vsctl --db=unix:SOCK --format=json --columns=name,tag,trunks list Port``
- InfiniBand: ``ibnetdiscover -p`` (the CA ports' LIDs, cached) then ``smpquery pkeys LID PORT``, run
  as the SM node under ibsim (``LD_PRELOAD=libumad2sim.so IBSIM_SOCKNAME=... SIM_HOST=...``)
- NVLink: each node's Fabric Manager, ``fmpm --unix-domain-socket SOCK -l`` (the stand-in's answer)
- the API: ``GET /api/v1/networks``, ``GET /api/v1/moves`` (paged, bearer token)
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from chaos.checker import Inventory, Sample, Segments

UMAD2SIM = ("/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so", "/usr/lib/*/umad2sim/libumad2sim.so*")


def _run(args: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None, timeout: float = 15) -> str:
    p = subprocess.run(list(args), env=dict(env) if env else None, cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, check=False)  # fmt: skip
    if p.returncode != 0:
        raise RuntimeError(f"{args[0]} exited {p.returncode}: {(p.stderr or p.stdout).strip()[:200]}")
    return p.stdout


def _ovs_set(v: Any) -> list[Any]:
    return list(v[1]) if isinstance(v, list) and v and v[0] == "set" else [v]


def parse_ovs_ports(text: str) -> dict[str, tuple[int | None, frozenset[int]]]:
    data = json.loads(text)
    cols = data["headings"]
    out = {}
    for row in data["data"]:
        r = dict(zip(cols, row, strict=True))
        tag = _ovs_set(r["tag"])
        out[r["name"]] = (int(tag[0]) if tag else None, frozenset(int(x) for x in _ovs_set(r["trunks"])))
    return out


def parse_ca_lids(text: str) -> dict[str, tuple[int, int]]:
    """``ibnetdiscover -p`` -> port GUID -> (LID, port number) of every CA port."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"CA\s+(\d+)\s+(\d+)\s+(0x[0-9a-fA-F]+)", line)
        if m:
            out[m.group(3).lower()] = (int(m.group(1)), int(m.group(2)))
    return out


def parse_pkeys(text: str) -> frozenset[int]:
    keys = set()
    for line in text.splitlines():
        if re.match(r"\s*\d+:", line):
            keys |= {int(x, 16) for x in line.split(":", 1)[1].split()}
    return frozenset(keys - {0})


def parse_fmpm_active(text: str) -> dict[int, frozenset[int]]:
    d = json.loads(text)
    return {
        p["partitionId"]: frozenset(g["physicalId"] for g in p["gpuInfo"]) for p in d["partitionInfo"] if p["isActive"]
    }


class FabricReader:
    """Reads one :class:`Sample` of the real fabrics (Ethernet, InfiniBand by SMP, NVLink by fmpm)."""

    def __init__(self, inv: Inventory) -> None:
        self.inv = inv
        self.lids: dict[str, tuple[int, int]] = {}
        lib = next((h for pat in UMAD2SIM for h in sorted(glob.glob(pat))), "")
        self.ib_env = {**os.environ, "LD_PRELOAD": lib, "IBSIM_SOCKNAME": inv.ibsim_sockname, "SIM_HOST": inv.sm_host}

    def sample(self) -> Sample:
        errors: list[str] = []
        eth: dict[str, tuple[int | None, frozenset[int]]] = {}
        ib: dict[str, frozenset[int]] = {}
        nv: dict[str, dict[int, frozenset[int]]] = {}
        eth_after: dict[str, tuple[int | None, frozenset[int]]] | None = None
        t = time.monotonic()
        try:
            eth = self._eth()
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            errors.append(f"ethernet: {e}")
        if self.inv.ibsim_sockname:
            try:
                ib = self._ib()
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                self.lids = {}
                ib = {}
                errors.append(f"infiniband: {e}")
            try:
                eth_after = self._eth()
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                errors.append(f"ethernet (after): {e}")
                eth_after = {}
        for n in self.inv.nodes:
            if n.fm is None or not self.inv.fmpm:
                continue
            try:
                nv[n.name] = parse_fmpm_active(_run([*self.inv.fmpm, "--unix-domain-socket", n.fm, "-l"]))
            except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
                errors.append(f"nvlink {n.name}: {e}")
        return Sample(t, eth, ib, nv, tuple(errors), eth_after)

    def _eth(self) -> dict[str, tuple[int | None, frozenset[int]]]:
        out = _run(["ovs-vsctl", f"--db=unix:{self.inv.ovsdb}", "--timeout=5", "--format=json",
                    "--columns=name,tag,trunks", "list", "Port"], timeout=10)  # fmt: skip
        return parse_ovs_ports(out)

    def _ib(self) -> dict[str, frozenset[int]]:
        os.makedirs(self.inv.scratch, exist_ok=True)
        want = [g.lower() for n in self.inv.nodes for g in n.guids]
        if any(g not in self.lids for g in want):
            self.lids = parse_ca_lids(_run(["ibnetdiscover", "-p"], self.ib_env, self.inv.scratch, 30))
        out = {}
        for n in self.inv.nodes:
            for g in n.guids:
                if g.lower() not in self.lids:
                    raise RuntimeError(f"port GUID {g} not discovered")
                lid, port = self.lids[g.lower()]
                text = _run(["smpquery", "pkeys", str(lid), str(port)], self.ib_env, self.inv.scratch)
                out[g] = parse_pkeys(text)
        return out


class Api:
    """The public API over HTTP (urllib), with a bearer token."""

    def __init__(self, base: str, token: str, timeout: float = 10) -> None:
        self.base, self.token, self.timeout = base.rstrip("/"), token, timeout

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + "/api/v1" + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw or b"null")
            except ValueError:
                return e.code, raw.decode(errors="replace")

    def all(self, path: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            sep = "&" if "?" in path else "?"
            code, page = self.call("GET", f"{path}{sep}limit=500&offset={len(items)}")
            if code != 200:
                raise RuntimeError(f"GET {path}: {code} {page}")
            items += page["items"]
            if not page["items"] or len(items) >= page["total"]:
                return items

    def segments(self) -> Segments:
        return Segments.from_networks(self.all("/networks"))

    def moves(self) -> list[dict[str, Any]]:
        return self.all("/moves")
