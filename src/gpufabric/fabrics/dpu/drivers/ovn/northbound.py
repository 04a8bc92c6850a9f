"""``OvnNbDriver``: tenants' logical switches (``gf-<tenant>``) and ports in the OVN
northbound database, with ``ovn-nbctl --db=<remote>``. Runs for real against the lab's OVN.

Each apply is one ``ovn-nbctl`` transaction that waits for ``ovn-northd`` to compile it into
the southbound DB (``--wait=sb``), then a read-back; switches left without ports are deleted."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from gpufabric.domain.errors import ApplyError, FabricError
from gpufabric.fabrics.dpu.entries.info import check_remote_tls
from gpufabric.fabrics.dpu.readers.dbjson import as_set, parse_list_json
from gpufabric.fabrics.dpu.state import SWITCH_PREFIX, LogicalPort
from gpufabric.transport.secrets import TlsFiles, TransportNote, plain_remote_notes


class OvnNbDriver:
    kind = "dpu"

    def __init__(self, remote: str, timeout: float = 10.0, tls: TlsFiles | None = None) -> None:
        self.remote, self.timeout = remote, timeout
        self.tls = check_remote_tls("dpu.ovn_nb", remote, tls)

    def transport_notes(self) -> tuple[TransportNote, ...]:
        return plain_remote_notes("ovn-nb", self.remote, "OVN northbound DB")

    def _run(self, args: Sequence[str], wait: bool = False) -> str:
        tls = self.tls.cli_args() if self.tls is not None else ()
        cmd = ["ovn-nbctl", f"--db={self.remote}", *tls, f"--timeout={max(1, int(self.timeout))}"]
        cmd += ["--wait=sb"] if wait else []
        try:
            r = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=self.timeout + 2, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise FabricError(f"ovn-nbctl on {self.remote}: {e}", fabric="dpu", device="ovn-nb") from None
        if r.returncode != 0:
            raise ApplyError(f"ovn-nbctl failed: {r.stderr.strip()[:300]}", fabric="dpu", device="ovn-nb")
        return r.stdout

    def switches(self) -> dict[str, list[str]]:
        """gf-* switch name -> its port UUIDs."""
        rows = parse_list_json(self._run(["--format=json", "--columns=name,ports", "list", "Logical_Switch"]))
        return {r["name"]: as_set(r["ports"]) for r in rows if str(r["name"]).startswith(SWITCH_PREFIX)}

    def read(self) -> frozenset[LogicalPort]:
        switches = self.switches()
        rows = parse_list_json(
            self._run(["--format=json", "--columns=_uuid,name,addresses,external_ids", "list", "Logical_Switch_Port"])
        )
        by_uuid = {r["_uuid"]: r for r in rows}
        out: set[LogicalPort] = set()
        for sw, uuids in switches.items():
            for u in uuids:
                r = by_uuid.get(u)
                if r is None:
                    continue
                ext = r.get("external_ids") or {}
                addrs = as_set(r.get("addresses") or [])
                mac = str(addrs[0]).split()[0] if addrs else ""
                tenant = sw[len(SWITCH_PREFIX) :]
                out.add(LogicalPort(r["name"], tenant, ext.get("gpufabric-node", ""), mac,
                                    ext.get("gpufabric-representor", ""), ext.get("gpufabric-slot", "")))  # fmt: skip
        return frozenset(out)

    def apply(self, removes: Sequence[LogicalPort], adds: Sequence[LogicalPort]) -> frozenset[LogicalPort]:
        args: list[str] = []
        for p in removes:
            args += ["--", "--if-exists", "lsp-del", p.name]
        for sw in sorted({p.switch for p in adds}):
            args += ["--", "--may-exist", "ls-add", sw, "--", "set", "Logical_Switch", sw]
            args += [f"external_ids:gpufabric-tenant={sw[len(SWITCH_PREFIX):]}"]
        for p in adds:
            args += ["--", "--may-exist", "lsp-add", p.switch, p.name, "--", "lsp-set-addresses", p.name, p.mac]
            args += ["--", "lsp-set-port-security", p.name, p.mac, "--", "set", "Logical_Switch_Port", p.name]
            args += [f"external_ids:gpufabric-node={p.node}"]  # a slot's port has no representor (ovsdb takes no empty value)
            args += [f"external_ids:gpufabric-representor={p.representor}"] if p.representor else []
            args += [f"external_ids:gpufabric-slot={p.slot}"] if p.slot else []
        if args:
            self._run(args, wait=True)
        touched = {p.switch for p in [*removes, *adds]}
        empty = [sw for sw, ports in self.switches().items() if sw in touched and not ports]
        if empty:
            self._run([a for sw in empty for a in ("--", "--if-exists", "ls-del", sw)])
        got = self.read()
        wrong = [p for p in adds if p not in got] + [p for p in removes if p in got]
        if wrong:
            raise ApplyError(f"OVN NB did not take {', '.join(map(str, wrong))}", fabric="dpu", device="ovn-nb")
        return frozenset(p for p in got if p.switch in touched)
