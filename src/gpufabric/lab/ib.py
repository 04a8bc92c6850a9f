"""The lab's InfiniBand fabric: one ibsim simulator and the trusted OpenSM, started for real.

Owns the processes and files under one run directory::

    <run_dir>/fabric.net        the ibsim net file (copied in by the caller)
    <run_dir>/ibsim.pid|.log    the simulator
    <run_dir>/opensm.pid|.log   the trusted SM (log flushed after each message)
    <run_dir>/opensm.conf       its options file; partitions.conf its -P file
    <run_dir>/m_key             the M_Key opensm.conf sets (0600), the driver's ``m_key_file``
    <run_dir>/cc_key            the CC_Key opensm.conf sets (0600), the driver's ``cc_key_file``
    <run_dir>/osm-tmp/opensm-sa.dump   OpenSM's SA database (``sa_db_dump TRUE``): IPoIB groups
    <run_dir>/osm-tmp/, osm-cache/   OSM_TMP_DIR / OSM_CACHE_DIR of this instance
    <run_dir>/scratch/          cwd of every libumad client (umad2sim writes ./sys-<pid>/ there)

Every libibumad program (opensm, smpquery, ibnetdiscover, sminfo, ibportstate) talks to the
simulator through ``LD_PRELOAD=libumad2sim.so``; ``IBSIM_SOCKNAME`` (unique per lab) selects
this fabric and ``SIM_HOST`` the node (ibsim node id or node description) the client runs on.
``stop`` ends only the PIDs recorded here, OpenSM before ibsim (an OpenSM whose simulator
went away hangs on exit).

Seen with OpenSM 3.3.23 + ibsim here: ``SUBNET UP`` is logged after each heavy sweep (start
and every ``kill -HUP``); the safe default partitions.conf below parses without PARSE ERROR
and gives CAs 0x7fff (limited), the SM's own port (SELF) and switches 0xffff.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import GpufabricError, LabError
from gpufabric.fabrics.infiniband.audit.hardening import (
    HardeningPolicy,
    parse_opensm_conf,
    render_opensm_conf_overrides,
)
from gpufabric.lab.procs import pid_alive, read_pid, run, stop_pid, wait_for

UMAD2SIM_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so",
    "/usr/lib/*/umad2sim/libumad2sim.so*",
    "/usr/lib*/umad2sim/libumad2sim.so*",
)

SAFE_PARTITIONS = """\
# gpufabric lab: initial partitions (written by gpufabric.lab.ib).
# Every CA is a *limited* member of the default partition (it can reach the SM/SA, not
# other CAs); the SM's own port and the switches are full members.
Default=0x7fff, ipoib : ALL_CAS=limited, ALL_SWITCHES=full, SELF=full ;
"""

SUBNET_UP = "SUBNET UP"


def umad2sim_library() -> Path:
    """Path of libumad2sim.so (package libumad2sim0)."""
    for pattern in UMAD2SIM_CANDIDATES:
        for hit in sorted(glob.glob(pattern)):
            return Path(hit)
    raise LabError("libumad2sim.so not found (install libumad2sim0; run scripts/setup.sh)", what="libumad2sim")


class IbFabric:
    """ibsim + one trusted OpenSM for one lab (``sockname`` must be unique per lab)."""

    def __init__(self, run_dir: Path, sockname: str, sm_host: str | None) -> None:
        self.run_dir = Path(run_dir)
        self.sockname = sockname
        self.sm_host = sm_host  # SIM_HOST of OpenSM; None: ibsim's default (first node of the file)
        self.netfile = self.run_dir / "fabric.net"
        self.scratch = self.run_dir / "scratch"
        self.ibsim_log = self.run_dir / "ibsim.log"
        self.opensm_log = self.run_dir / "opensm.log"
        self.opensm_conf = self.run_dir / "opensm.conf"
        self.m_key_file = self.run_dir / "m_key"
        self.cc_key_file = self.run_dir / "cc_key"
        self.partitions_conf = self.run_dir / "partitions.conf"
        self.osm_tmp = self.run_dir / "osm-tmp"
        self.osm_cache = self.run_dir / "osm-cache"
        self._ibsim_pid = self.run_dir / "ibsim.pid"
        self._opensm_pid = self.run_dir / "opensm.pid"

    # -- state -------------------------------------------------------------------------
    @property
    def ibsim_pid(self) -> int | None:
        return read_pid(self._ibsim_pid)

    @property
    def opensm_pid(self) -> int | None:
        return read_pid(self._opensm_pid)

    def ibsim_running(self) -> bool:
        return pid_alive(self.ibsim_pid)

    def opensm_running(self) -> bool:
        return pid_alive(self.opensm_pid)

    def running(self) -> bool:
        return self.ibsim_running() and self.opensm_running()

    def log_offset(self) -> int:
        """Current size of the OpenSM log (pass to :meth:`wait_subnet_up`)."""
        try:
            return self.opensm_log.stat().st_size
        except FileNotFoundError:
            return 0

    # -- environment for libumad clients ----------------------------------------------
    def tool_env(self, sim_host: str | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment to run a libibumad tool as ``sim_host`` (node id/description) on this fabric."""
        env = dict(os.environ if base is None else base)
        env["LD_PRELOAD"] = str(umad2sim_library())
        env["IBSIM_SOCKNAME"] = self.sockname
        env.pop("SIM_HOST", None)
        if sim_host:
            env["SIM_HOST"] = sim_host
        return env

    def driver_options(self, sm_host: str | None, trusted_sm_guids: Sequence[object] = ()) -> dict[str, Any]:
        """The OpenSM driver's options (``fabrics.yaml`` / ``OpenSMConfig.from_options``) for
        this fabric's trusted SM, reading the fabric by SMP as ``sm_host``."""
        return {
            "partitions_conf": str(self.partitions_conf),
            "log_path": str(self.opensm_log),
            "pid_file": str(self._opensm_pid),
            "trusted_sm_guids": [str(g) for g in trusted_sm_guids],
            "diag_env": self.tool_env(sm_host, base={}),
            "diag_cwd": str(self.scratch),
            "sa_dump": str(self.sa_dump),
            # ibsim does not enforce M_Key: every SMP carries it all the same (over stdin), as on a site
            **({"m_key_file": str(self.m_key_file)} if self.m_key_file.exists() else {}),
            **({"cc_key_file": str(self.cc_key_file)} if self.cc_key_file.exists() else {}),
        }

    @property
    def sa_dump(self) -> Path:
        """OpenSM's SA database dump (``sa_db_dump TRUE``), rewritten after every sweep."""
        return self.osm_tmp / "opensm-sa.dump"

    def run_tool(self, args: Sequence[str], sim_host: str | None = None, timeout: float = 30) -> str:
        """Run an infiniband-diags tool (smpquery, ibnetdiscover, ...) against this fabric; stdout."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        return run(args, env=self.tool_env(sim_host), cwd=self.scratch, timeout=timeout)

    # -- ibsim --------------------------------------------------------------------------
    def start_ibsim(self, netfile_text: str, max_nodes: int | None = None, max_ports: int | None = None) -> int:
        """Write the net file and start ibsim on it; a no-op returning the PID if it runs."""
        if self.ibsim_running():
            pid = self.ibsim_pid
            assert pid is not None
            return pid
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.scratch.mkdir(exist_ok=True)
        self.netfile.write_text(netfile_text)
        args = ["ibsim", "-s", "-n"]
        if max_nodes and max_nodes > 2048:
            args += ["-N", str(max_nodes)]
        if max_ports:  # ibsim's default table holds 13,312 ports (about 4,000 HCAs and their switches)
            args += ["-P", str(max_ports)]
        args.append(str(self.netfile))
        env = dict(os.environ)
        env["IBSIM_SOCKNAME"] = self.sockname
        env.pop("LD_PRELOAD", None)
        offset = self.ibsim_log.stat().st_size if self.ibsim_log.exists() else 0
        pid = self._spawn(args, env, self.ibsim_log, self._ibsim_pid)
        wait_for(lambda: _log_has(self.ibsim_log, offset, "Network simulator ready") or not pid_alive(pid), 20, "ibsim")
        if not pid_alive(pid):
            raise LabError(f"ibsim exited: {_tail(self.ibsim_log)}", what="ibsim", log=str(self.ibsim_log))
        return pid

    def describe(self, descriptions: Mapping[str, str]) -> None:
        """What root on a host does with rdma-ndd or sysfs ``node_desc``: the CAs of ``descriptions``
        (ibsim node id, e.g. ``"gpu-a01 mlx5_0"`` -> the new text) answer NodeDescription with it.
        ibsim cannot change one while it runs (its NodeDescription is Get-only and its console has
        no command for it), so the net file carries it the way ibsim reads it (``Hca 1 "<id>" #
        "<description>"``) and ibsim and the trusted OpenSM are restarted on it: the node ids (the
        ``SIM_HOST`` clients attach by) stay, OpenSM keeps its keys and programs every PKey table
        again from partitions.conf. A ``"``, ``\\`` or newline in a description is a LabError."""
        text = self.netfile.read_text()
        for node_id, desc in descriptions.items():
            if any(c in desc for c in '"\\\n'):
                raise LabError(f"a lab node description cannot hold a quote, a backslash or a newline: {desc!r}",
                               what="describe")  # fmt: skip
            line = re.compile(rf'^(Hca|Ca)(\s+\d+\s+"{re.escape(node_id)}")(\s*#.*)?$', re.M)
            if not line.search(text):
                raise LabError(f"no CA {node_id!r} in the lab's net file", what="describe")
            text = line.sub(f'\\1\\2 # "{desc}"', text)
        stop_pid(self.opensm_pid)
        self._opensm_pid.unlink(missing_ok=True)
        stop_pid(self.ibsim_pid)
        self._ibsim_pid.unlink(missing_ok=True)
        self.start_ibsim(text)
        self.start_opensm()

    # -- OpenSM -------------------------------------------------------------------------
    def write_partitions(self, text: str) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.partitions_conf.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.partitions_conf)

    def start_opensm(self, *, priority: int = 15, sweep_interval: int = 0, timeout: float = 60) -> int:
        """Start the trusted OpenSM (if not running) and wait for its first ``SUBNET UP``."""
        if self.opensm_running():
            pid = self.opensm_pid
            assert pid is not None
            return pid
        if not self.ibsim_running():
            raise LabError("ibsim is not running; start it first", what="opensm")
        if not self.partitions_conf.exists():
            self.write_partitions(SAFE_PARTITIONS)
        for d in (self.osm_tmp, self.osm_cache, self.scratch):
            d.mkdir(parents=True, exist_ok=True)
        # hardened like a production SM (fresh random sm_key/sa_key/m_key; 0600: it holds them),
        # so the hardening audit reads a clean opensm.conf on the lab
        self.opensm_conf.touch(mode=0o600)
        self.opensm_conf.chmod(0o600)
        policy = self._policy()
        for f, key in ((self.m_key_file, policy.m_key), (self.cc_key_file, policy.cc_key)):
            f.touch(mode=0o600)
            f.chmod(0o600)
            f.write_text(f"0x{key or 0:016x}\n")
        self.opensm_conf.write_text(
            "# written by gpufabric.lab.ib\n"
            + render_opensm_conf_overrides(policy).replace("sm_priority 15\n", "")
            + "force_log_flush TRUE\n"
            "sa_db_dump TRUE\n"
            f"sweep_interval {sweep_interval}\n"
            f"sm_priority {priority}\n"
            f"partition_config_file {self.partitions_conf}\n"
            f"log_file {self.opensm_log}\n"
            f"dump_files_dir {self.osm_tmp}\n"
            f"per_module_logging_file {self.osm_tmp / 'per-module-logging.conf'}\n"
        )
        env = self.tool_env(self.sm_host)
        env["OSM_TMP_DIR"] = str(self.osm_tmp)
        env["OSM_CACHE_DIR"] = str(self.osm_cache)
        offset = self.log_offset()
        args = [
            "opensm",
            "-F",
            str(self.opensm_conf),
            "-P",
            str(self.partitions_conf),
            "-f",
            str(self.opensm_log),
            "-s",
            str(sweep_interval),
            "-p",
            str(priority),
        ]
        pid = self._spawn(args, env, self.run_dir / "opensm.out", self._opensm_pid, cwd=self.scratch)
        self.wait_subnet_up(offset, timeout=timeout)
        return pid

    def _policy(self) -> HardeningPolicy:
        """The keys of the running lab's opensm.conf when there is one (a restart keeps its
        sm_key/sa_key/m_key: the driver holds the M_Key file's key), else fresh random ones."""
        try:
            conf = parse_opensm_conf(self.opensm_conf.read_text())
            cc = int(conf["cc_key"], 0) if "cc_key" in conf else HardeningPolicy.generate().cc_key
            return HardeningPolicy(int(conf["sm_key"], 0), int(conf["sa_key"], 0), int(conf["m_key"], 0), cc_key=cc)
        except (OSError, KeyError, ValueError, GpufabricError):
            return HardeningPolicy.generate()

    def hup(self) -> int:
        """``kill -HUP`` OpenSM (re-read partitions.conf, heavy sweep); return the log offset before it."""
        pid = self.opensm_pid
        if not pid_alive(pid):
            raise LabError("OpenSM is not running", what="opensm")
        assert pid is not None
        offset = self.log_offset()
        os.kill(pid, signal.SIGHUP)
        return offset

    def wait_subnet_up(self, offset: int, timeout: float = 60) -> None:
        """Wait until ``SUBNET UP`` appears in the OpenSM log after byte ``offset``."""

        def up() -> bool:
            if not self.opensm_running():
                raise LabError(f"OpenSM exited: {_tail(self.opensm_log)}", what="opensm", log=str(self.opensm_log))
            return _log_has(self.opensm_log, offset, SUBNET_UP)

        wait_for(up, timeout, "OpenSM SUBNET UP")

    def log_since(self, offset: int) -> str:
        try:
            with self.opensm_log.open("rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    # -- stop ---------------------------------------------------------------------------
    def restart_opensm(self) -> int:
        """Stop the trusted OpenSM (by its recorded PID) and start it again."""
        stop_pid(self.opensm_pid)
        self._opensm_pid.unlink(missing_ok=True)
        return self.start_opensm()

    def start_rogue_sm(self, host: str, sm_key: str = "0x5ec2e7") -> int:
        """Start what a tenant with root could run on ``host`` (its node description or
        host name): an opensm with priority 15, its own sm_key and an everything-full
        partitions.conf. For demos and tests of the rogue-SM defence; stopped by :meth:`stop`."""
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", host)
        d = self.run_dir / f"rogue-{name}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "p.conf").write_text("Default=0x7fff : ALL=full ;\n")
        (d / "o.conf").write_text("force_log_flush TRUE\n")
        env = self.tool_env(host)
        env["OSM_TMP_DIR"] = env["OSM_CACHE_DIR"] = str(d)
        args = ["opensm", "-F", "o.conf", "-P", "p.conf", "-f", "r.log", "-s", "0", "-p", "15", "-k", sm_key]
        return self._spawn(args, env, d / "out.log", self.run_dir / f"rogue-{name}.pid", cwd=d)

    def stop(self) -> None:
        """Stop rogue SMs started here, the recorded OpenSM, then ibsim; remove stale ./sys-* dirs."""
        for pid_file in self.run_dir.glob("rogue-*.pid"):
            stop_pid(read_pid(pid_file))
            pid_file.unlink(missing_ok=True)
        stop_pid(self.opensm_pid)
        self._opensm_pid.unlink(missing_ok=True)
        stop_pid(self.ibsim_pid)
        self._ibsim_pid.unlink(missing_ok=True)
        if self.scratch.exists():
            for d in self.scratch.glob("sys-*"):
                shutil.rmtree(d, ignore_errors=True)

    # -- internals ----------------------------------------------------------------------
    def _spawn(self, args: list[str], env: dict[str, str], log: Path, pid_file: Path, cwd: Path | None = None) -> int:
        with log.open("ab") as out:
            try:
                p = subprocess.Popen(
                    args,
                    env=env,
                    cwd=cwd or self.scratch,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except FileNotFoundError as e:
                raise LabError(f"command not found: {args[0]} (run scripts/setup.sh)", command=args[0]) from e
        pid_file.write_text(f"{p.pid}\n")
        return p.pid


def _log_has(path: Path, offset: int, needle: str) -> bool:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return needle.encode() in f.read()
    except FileNotFoundError:
        return False


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return "(no log)"
    return " | ".join(lines[-n:])
