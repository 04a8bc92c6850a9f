"""Run infiniband-diags (ibnetdiscover, smpquery, sminfo, ibportstate) for the OpenSM driver.

Owns the command execution only: the environment/prefix that reaches the fabric (on a
site: the SM host's own tools, maybe behind ``ssh``/``sudo``; in the lab:
``LD_PRELOAD=libumad2sim.so`` + ``IBSIM_SOCKNAME`` + ``SIM_HOST=<sm node>``), a scratch
working directory (umad2sim writes ``./sys-<pid>/`` there), and a small thread pool that
runs many SMP queries concurrently. Every SMP is a separate process (~20 ms each here);
parsing is in :mod:`~gpufabric.fabrics.infiniband.readers.diags` and :mod:`~gpufabric.fabrics.infiniband.readers.ibnetdiscover`. The driver reads SMPs in bulk
through :mod:`.smpread` (one batch process); these per-query tools are its fallback.

M_Key: with ``m_key`` (a :class:`Secret`), every tool that sends SMPs (``ibnetdiscover``,
``smpquery``, ``sminfo``, ``ibportstate``) reads it from its config file, which is its
standard input: ``-z /dev/stdin`` and ``m_key=0x...`` written to the pipe (infiniband-diags
44 read ``m_key`` from ibdiag.conf exactly as ``-y``: every SMP carries it). The key is
never on a command line (``ps`` / ``/proc/PID/cmdline`` show it to every local user) nor in
the environment; it crosses an ``ssh``/``sudo`` prefix on the same stdin. ``-z`` replaces
``/etc/infiniband-diags/ibdiag.conf``: without a prefix its other settings (CA, Port,
timeout...) are sent ahead of the key. Error messages never show it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from gpufabric.domain.errors import FabricError, GpufabricError
from gpufabric.fabrics.infiniband.readers.diags import (
    NodeInfo,
    PkeyDump,
    PortInfo,
    parse_sminfo,
    parse_smpquery_nodeinfo,
    parse_smpquery_pkeys,
    parse_smpquery_portinfo,
)
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import IbTopology, parse_ibnetdiscover
from gpufabric.fabrics.infiniband.state import SmSeen
from gpufabric.transport.secrets import Secret

T = TypeVar("T")
KEY_CONFIG_ARGS = ("-z", "/dev/stdin")  # infiniband-diags: "use config file" (read for CA, Port, m_key...)
IBDIAG_CONF = "/etc/infiniband-diags/ibdiag.conf"  # the tools' default config, which -z replaces
R = TypeVar("R")


class Diag:
    """infiniband-diags runner: ``prefix + [tool, args...]`` with ``env`` in ``cwd``."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
        cwd: Path | None = None,
        timeout: float = 20.0,
        workers: int = 4,
        smp_timeout_ms: int = 0,
        m_key: Secret | None = None,
    ) -> None:
        self.m_key = m_key
        self.env = dict(env or {})
        self.prefix = tuple(prefix)
        self.cwd = cwd
        self.timeout = timeout
        self.workers = max(1, workers)
        self.smp_timeout_ms = smp_timeout_ms

    def _full_env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        env.update(extra or {})
        return env

    def key_args(self) -> list[str]:
        """``["-z", "/dev/stdin"]`` when an M_Key is configured (the tool reads it from the
        config :meth:`key_config` writes to its stdin), else ``[]``."""
        return list(KEY_CONFIG_ARGS) if self.m_key is not None else []

    def key_config(self) -> str | None:
        """The ibdiag.conf text a tool reads on stdin: the M_Key (and, without a prefix,
        the local ibdiag.conf's other settings, which ``-z`` would otherwise drop)."""
        if self.m_key is None:
            return None
        local = ""
        if not self.prefix:
            try:
                local = "".join(
                    ln + "\n"
                    for ln in Path(IBDIAG_CONF).read_text().splitlines()
                    if not ln.strip().startswith("m_key")
                )
            except (OSError, UnicodeDecodeError):
                local = ""
        return f"{local}m_key={self.m_key.reveal()}\n"

    def run(self, args: Sequence[str], extra_env: Mapping[str, str] | None = None) -> str:
        """Run one tool; stdout; FabricError (with stderr's last line) on failure. With an
        M_Key the tool's stdin carries its config (:meth:`key_config`), else it gets none."""
        argv = [*self.prefix, *args]
        config = self.key_config()
        shown = " ".join(args)  # holds no secret: the key is on stdin
        if self.cwd is not None:
            self.cwd.mkdir(parents=True, exist_ok=True)
        try:
            p = subprocess.run(
                argv,
                env=self._full_env(extra_env),
                cwd=self.cwd,
                input=config,
                stdin=None if config is not None else subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError:
            raise FabricError(
                f"command not found: {argv[0]} (infiniband-diags installed?)", fabric="infiniband"
            ) from None
        except subprocess.TimeoutExpired:
            raise FabricError(f"{shown} timed out after {self.timeout}s", fabric="infiniband") from None
        if p.returncode != 0:
            lines = (p.stderr or p.stdout).strip().splitlines()
            raise FabricError(
                f"{shown} failed (exit {p.returncode}): {lines[-1] if lines else ''}",
                fabric="infiniband",
                command=list(args),
                returncode=p.returncode,
            )
        return p.stdout

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R | GpufabricError]:
        """``fn`` over ``items`` on the pool; a GpufabricError is returned in place, not raised."""

        def safe(x: T) -> R | GpufabricError:
            try:
                return fn(x)
            except GpufabricError as e:
                return e

        seq = list(items)
        if len(seq) <= 1:
            return [safe(x) for x in seq]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(seq))) as pool:
            return list(pool.map(safe, seq))

    def _smp(self, *args: str) -> list[str]:
        t = ["-t", str(self.smp_timeout_ms)] if self.smp_timeout_ms else []
        return ["smpquery", *self.key_args(), *t, *args]

    # -- single queries ---------------------------------------------------------------
    def discover(self) -> IbTopology:
        return parse_ibnetdiscover(self.run(["ibnetdiscover", *self.key_args(), "-p"]))

    def pkeys(self, lid: int, port: int) -> PkeyDump:
        return parse_smpquery_pkeys(self.run(self._smp("pkeys", str(lid), str(port))))

    def portinfo(self, lid: int, port: int) -> PortInfo:
        return parse_smpquery_portinfo(self.run(self._smp("portinfo", str(lid), str(port))))

    def nodeinfo(self, lid: int) -> NodeInfo:
        return parse_smpquery_nodeinfo(self.run(self._smp("nodeinfo", str(lid))))

    def sminfo(self, lid: int | None = None) -> SmSeen:
        return parse_sminfo(self.run(["sminfo", *self.key_args()] + ([str(lid)] if lid else [])))

    def switchinfo(self, lid: int) -> str:
        """``smpquery switchinfo LID`` output (McastFdbCap, ...)."""
        return self.run(self._smp("switchinfo", str(lid)))

    def port_disable(self, switch_lid: int, switch_port: int) -> str:
        return self.run(["ibportstate", *self.key_args(), str(switch_lid), str(switch_port), "disable"])

    def port_enable(self, switch_lid: int, switch_port: int) -> str:
        return self.run(["ibportstate", *self.key_args(), str(switch_lid), str(switch_port), "enable"])
