"""``DpuOvsDriver``: the managed keys of a DPU-side Open vSwitch, over OVSDB with ``ovs-vsctl``.

One ``ovs-vsctl --db=<remote>`` transaction per apply (it waits until ``ovs-vswitchd`` has
reconfigured, so a committed change is one the switch took), then a read-back of the row.
Runs for real against the lab's per-DPU userspace OVS."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from gpufabric.domain.errors import ApplyError, FabricError
from gpufabric.fabrics.dpu.entries.info import check_remote_tls
from gpufabric.fabrics.dpu.plan.profiles import OBSERVED_OVS_KEYS
from gpufabric.fabrics.dpu.readers.dbjson import parse_list_json
from gpufabric.fabrics.dpu.state import OvsSetting
from gpufabric.transport.secrets import TlsFiles, TransportNote, plain_remote_notes


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class DpuOvsDriver:
    kind = "dpu"

    def __init__(self, host: str, remote: str, timeout: float = 10.0, tls: TlsFiles | None = None) -> None:
        self.host, self.remote, self.timeout = host, remote, timeout
        self.tls = check_remote_tls(f"dpu.ovsdb.{host}", remote, tls)

    def transport_notes(self) -> tuple[TransportNote, ...]:
        return plain_remote_notes(self.host, self.remote, f"DPU OVSDB of {self.host}")

    def _run(self, args: Sequence[str]) -> str:
        tls = self.tls.cli_args() if self.tls is not None else ()
        cmd = ["ovs-vsctl", f"--db={self.remote}", *tls, f"--timeout={max(1, int(self.timeout))}", *args]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout + 2, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise FabricError(f"ovs-vsctl on {self.remote}: {e}", fabric="dpu", device=self.host) from None
        if r.returncode != 0:
            raise ApplyError(
                f"ovs-vsctl on {self.remote} failed: {r.stderr.strip()[:300]}", fabric="dpu", device=self.host
            )
        return r.stdout

    def read(self) -> frozenset[OvsSetting]:
        rows = parse_list_json(self._run(["--format=json", "--columns=other_config,external_ids", "list", "Open_vSwitch"]))
        out: set[OvsSetting] = set()
        for row in rows:
            for column in ("other_config", "external_ids"):
                for k, v in (row.get(column) or {}).items():
                    key = f"{column}:{k}"
                    if key in OBSERVED_OVS_KEYS:
                        out.add(OvsSetting(self.host, key, str(v)))
        return frozenset(out)

    def apply(self, removes: Sequence[OvsSetting], adds: Sequence[OvsSetting]) -> frozenset[OvsSetting]:
        args: list[str] = []
        for s in removes:
            column, key = s.key.split(":", 1)
            args += ["--", "remove", "Open_vSwitch", ".", column, key]
        for s in adds:
            args += ["--", "set", "Open_vSwitch", ".", f"{s.key}={_quote(s.value)}"]
        if args:
            self._run(args)
        got = self.read()
        missing = [s for s in adds if s not in got] + [s for s in removes if s in got]
        if missing:
            raise ApplyError(
                f"{self.host}: DPU OVS did not take {', '.join(map(str, missing))}", fabric="dpu", device=self.host
            )
        return got
