"""The M_Key never on a command line, on the real ibsim + OpenSM 3.3.23 lab (issue 31 item 4).

The lab's OpenSM runs with an M_Key (opensm.conf ``m_key``, the driver's ``m_key_file``).
While the driver reads the fabric the ways that carry the key - ibnetdiscover, the batch
reader (smpbatch), the smpquery fallback, sminfo, ibportstate disable/enable - a sampler
reads every process's ``/proc/PID/cmdline`` (what ``ps`` shows any local user) and the key
must never appear. ibsim ignores M_Key, so that the key still reaches the fabric is shown on
the wire: the same reads under an ``strace`` prefix, whose MADs to ibsim hold its 8 bytes.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import BatchSmpReader, DiagSmpReader, SmpQuery
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import ca_ports
from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile, hca_port_guid

pytestmark = pytest.mark.root

SM = hca_port_guid(0, 0)


class CmdlineSampler:
    """Reads every /proc/*/cmdline in a loop until stopped: the commands seen, and any that
    held one of ``needles``."""

    def __init__(self, needles: list[str]) -> None:
        self.needles = [n.lower() for n in needles]
        self.seen: set[str] = set()
        self.leaks: set[str] = set()
        self.passes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                cmd = raw.replace(b"\0", b" ").decode(errors="replace").strip()
                if any(n in cmd.lower() for n in self.needles):
                    self.leaks.add(cmd)
                if cmd:
                    self.seen.add(cmd)
            self.passes += 1

    def __enter__(self) -> CmdlineSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def fab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IbFabric]:
    f = IbFabric(tmp_path_factory.mktemp("ibmkey"), f"gf-t-mkey-{os.getpid()}", SM_NODE)
    try:
        f.start_ibsim(generate_netfile(2, 1))
        f.start_opensm()
        yield f
    finally:
        f.stop()


def driver(fab: IbFabric, reader: str, **over: object) -> OpenSMDriver:
    opts = fab.driver_options(SM_NODE, [SM])
    assert "m_key_file" in opts  # the lab's driver holds the fabric's M_Key
    return OpenSMDriver(dataclasses.replace(OpenSMConfig.from_options(opts), reader=reader, **over))  # type: ignore[arg-type]


def key_of(fab: IbFabric) -> int:
    return int(fab.m_key_file.read_text().strip(), 0)


def key_forms(key: int) -> list[str]:
    return [f"{key:x}", f"{key:016x}", str(key)]


def every_keyed_read(drv: OpenSMDriver) -> None:
    """Each way the driver sends an SMP carrying the M_Key."""
    state = drv.observe()  # ibnetdiscover + the batch reader
    assert state.master_guid == SM
    ports = sorted(ca_ports(drv.diag.discover()).values(), key=lambda p: p.guid)
    gpu = next(p for p in ports if p.guid != SM and p.switch_lid)
    queries = [SmpQuery("pkeys", gpu.lid, gpu.port_num), SmpQuery("portinfo", gpu.lid, gpu.port_num)]
    assert all(not isinstance(r, Exception) for r in DiagSmpReader(drv.diag).read(queries))
    assert drv.diag.sminfo().guid == SM
    assert gpu.switch_lid is not None and gpu.switch_port is not None
    drv.diag.port_disable(gpu.switch_lid, gpu.switch_port)
    drv.diag.port_enable(gpu.switch_lid, gpu.switch_port)


def test_the_m_key_is_on_no_command_line_while_it_is_used(fab: IbFabric) -> None:
    drv = driver(fab, "batch")
    assert isinstance(drv.reader, BatchSmpReader)
    with CmdlineSampler(key_forms(key_of(fab))) as sampler:
        every_keyed_read(drv)
        pid = drv.reader.pid
        assert pid is not None
        passes = sampler.passes
        while sampler.passes < passes + 2:  # a whole pass while the reader child still runs
            pass
    drv.close()
    assert sampler.leaks == set()
    assert any("smpbatch" in c and "--m-key-stdin" in c for c in sampler.seen), sorted(sampler.seen)


def test_the_m_key_still_reaches_every_smp(fab: IbFabric, tmp_path: Path) -> None:
    """Under ``strace`` (the diag prefix, which the batch reader shares) each tool's MADs to
    ibsim carry the key's 8 bytes (big-endian, the MAD's M_Key field)."""
    trace = tmp_path / "trace"
    prefix = ("strace", "-f", "-qq", "-x", "-s", "512", "-e", "trace=execve,write,sendto,sendmsg", "-ff", "-o", str(trace))
    drv = driver(fab, "batch", diag_prefix=prefix)
    with CmdlineSampler(key_forms(key_of(fab))) as sampler:
        every_keyed_read(drv)
        drv.close()
    assert sampler.leaks == set()
    wire = "".join(f"\\x{b:02x}" for b in key_of(fab).to_bytes(8, "big"))
    sent: dict[str, list[bool]] = {}  # tool -> for each of its runs: did its MADs carry the key
    for t in tmp_path.glob("trace.*"):
        text = t.read_text(errors="replace")
        run = re.search(r'execve\("([^"]+)", \[(.*?)\]', text)
        if run is None or "\\x" not in text:  # strace itself, or a process that sent no MAD
            continue
        argv = run.group(2)
        tool = "smpbatch" if "smpbatch" in argv else Path(run.group(1)).name
        sent.setdefault(tool, []).append(wire in text)
    assert sent == {
        "ibnetdiscover": [True, True],  # observe's discovery, then every_keyed_read's
        "smpbatch": [True],
        "smpquery": [True, True],
        "sminfo": [True],
        "ibportstate": [True, True],
    }
