"""The batch reader kept warm while an apply waits for OpenSM's sweep (fake smpbatch children,
no fabric): at thousands of ports the sweep outlasts the child's idle exit, and the read that
verifies the tables must not wait for a new process."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.opensm.hosts import LocalSmHost
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import BatchSmpReader, DiagSmpReader, keep_warm

from .test_ib_smpread import QUERIES, check_answers, fake_reader


def test_warm_starts_a_child_the_next_read_uses(tmp_path: Path) -> None:
    r = fake_reader(tmp_path, "ok")
    r.warm()
    first = r.pid
    assert first is not None and r.starts == 1
    check_answers(r.read(QUERIES))
    assert r.pid == first and r.starts == 1
    r.close()


def test_warm_keeps_a_child_past_its_idle_exit(tmp_path: Path) -> None:
    r = fake_reader(tmp_path, "ok")
    r.idle_exit = 1.0  # a child is replaced once 0.8 s passed without a request
    check_answers(r.read(QUERIES))
    first = r.pid
    for _ in range(4):  # 2 s in all, warmed every 0.5 s
        time.sleep(0.5)
        r.warm()
    check_answers(r.read(QUERIES))
    assert (r.pid, r.starts) == (first, 1)
    time.sleep(0.9)  # not warmed: the next read starts a new child, as before
    check_answers(r.read(QUERIES))
    assert r.starts == 2 and r.pid != first
    r.close()


def test_warm_of_a_dead_child_starts_another(tmp_path: Path) -> None:
    r = fake_reader(tmp_path, "ok")
    r.warm()
    c = r._holder[0]
    assert c is not None
    c.proc.kill()
    c.proc.wait()
    r._last_use = 0.0  # due for a ping: the dead child is noticed then
    r.warm()
    assert r.starts == 2 and r.pid is not None
    check_answers(r.read(QUERIES))
    r.close()


def test_keep_warm_leaves_the_smpquery_fallback_alone() -> None:
    keep_warm(DiagSmpReader(OpenSMDriver(OpenSMConfig.from_options({"partitions_conf": "/p", "log_path": "/l"})).diag))


def test_the_wait_for_subnet_up_keeps_the_reader_warm(tmp_path: Path) -> None:
    log = tmp_path / "opensm.log"
    log.write_text("")
    drv = OpenSMDriver(OpenSMConfig.from_options({"partitions_conf": str(tmp_path / "p.conf"), "log_path": str(log)}))
    drv.reader.close()
    reader = fake_reader(tmp_path, "ok")
    reader.idle_exit = 1.0
    drv.reader = reader
    check_answers(reader.read(QUERIES))
    first = reader.pid

    def sweep_done() -> None:
        time.sleep(2.0)  # a sweep longer than the reader's idle exit
        with log.open("a") as f:
            f.write("Dec 01 19:00:00 123456 [7F] 0x02 -> SUBNET UP\n")

    t = threading.Thread(target=sweep_done)
    t.start()
    scan = drv._wait_subnet_up(LocalSmHost(tmp_path / "p.conf", log), 0)
    t.join()
    assert scan.subnet_up
    assert isinstance(drv.reader, BatchSmpReader)
    check_answers(reader.read(QUERIES))
    assert (reader.pid, reader.starts) == (first, 1)  # the same child, still fresh: no start after the sweep
    drv.close()


def test_the_wait_reads_a_local_log_again_only_once_it_has_grown(tmp_path: Path) -> None:
    log = tmp_path / "opensm.log"
    log.write_text("Dec 01 18:59:59 000001 [7F] 0x02 -> SUBNET UP\n")  # before the reload: not counted
    offset = log.stat().st_size
    drv = OpenSMDriver(OpenSMConfig.from_options({"partitions_conf": str(tmp_path / "p.conf"), "log_path": str(log)}))
    host = LocalSmHost(tmp_path / "p.conf", log)
    reads: list[int] = []
    real = host.read_from

    def counted(path: Path, at: int) -> str:
        reads.append(at)
        return real(path, at)

    host.read_from = counted  # type: ignore[method-assign]

    def sweep() -> None:
        time.sleep(0.3)  # ~75 polls of an unchanged log
        with log.open("a") as f:
            f.write("Dec 01 19:00:00 000002 [7F] 0x02 -> Entering heavy sweep\n")
        time.sleep(0.3)
        with log.open("a") as f:
            f.write("Dec 01 19:00:01 000003 [7F] 0x02 -> SUBNET UP\n")

    t = threading.Thread(target=sweep)
    t.start()
    scan = drv._wait_subnet_up(host, offset)
    t.join()
    assert scan.subnet_up
    assert 2 <= len(reads) <= 4 and set(reads) == {offset}  # first poll, each growth (a write may be seen in two)
    drv.close()
