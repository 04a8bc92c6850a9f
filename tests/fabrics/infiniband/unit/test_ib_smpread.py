"""BatchSmpReader's process handling with fake smpbatch children (no fabric), and the fallback.

The fake child replays the recorded responses of tests/fixtures/infiniband-diags/smpbatch.json
(the real smpbatch's output on ibsim) by (op, lid, port); variants die once, never answer, or
fail to open their port.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpufabric.domain.errors import FabricError, GpufabricError, ValidationError
from gpufabric.fabrics.infiniband.drivers.opensm.diag import Diag
from gpufabric.fabrics.infiniband.drivers.opensm.driver import OpenSMConfig, OpenSMDriver
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import (
    MODULE,
    BatchSmpReader,
    DiagSmpReader,
    SmpQuery,
    make_reader,
)
from gpufabric.fabrics.infiniband.readers.diags import PkeyDump, PortInfo, parse_sminfo

DIAGS = Path(__file__).parents[3] / "fixtures" / "infiniband-diags"

FAKE = """
import json, os, sys, time
rows = json.load(open(sys.argv[1]))["rows"]
table = {(r["op"], r["lid"], r["port"]): r["response"] for r in rows}
mode, flag = sys.argv[2], sys.argv[3]
if mode == "crash":  # what umad2sim does when ibsim has no free client slot
    sys.stderr.write("ibpanic: [1] sim_init: connect failed: Success\\n")
    sys.exit(255)
if mode == "fatal":
    print(json.dumps({"fatal": "mad_rpc_open_port failed"}), flush=True)
    sys.exit(2)
print(json.dumps({"ready": os.getpid()}), flush=True)
for line in sys.stdin:
    q = json.loads(line)["q"]
    if mode == "silent":
        time.sleep(60)
    if mode == "die-once" and not os.path.exists(flag):
        open(flag, "w").close()
        print(json.dumps(table[tuple(q[0])]), flush=True)
        os._exit(1)
    for op, lid, port in q:
        print(json.dumps(table.get((op, lid, port), {"ok": 0, "error": "node info query failed"})), flush=True)
    print(json.dumps({"done": len(q)}), flush=True)
"""


def fake_reader(tmp_path: Path, mode: str, timeout: float = 10.0) -> BatchSmpReader:
    script = tmp_path / "fake_smpbatch.py"
    script.write_text(FAKE)
    cmd = (sys.executable, str(script), str(DIAGS / "smpbatch.json"), mode, str(tmp_path / "died"))
    return BatchSmpReader(cwd=tmp_path, timeout=timeout, command=cmd)


QUERIES = [SmpQuery("pkeys", 8, 1), SmpQuery("portinfo", 1, 1), SmpQuery("sminfo", 1), SmpQuery("pkeys", 999, 1)]


def check_answers(got: Sequence[object]) -> None:
    pk, pi, sm, missing = got
    assert isinstance(pk, PkeyDump) and len(pk.entries) == 42 and pk.entries[:3] == (0x7FFF, 0x9000, 0x8B01)
    assert isinstance(pi, PortInfo) and (pi.lid, pi.is_sm) == (1, True)
    assert sm == parse_sminfo((DIAGS / "sminfo.master.txt").read_text().replace("priority 14", "priority 15"))
    assert isinstance(missing, FabricError) and "node info query failed" in missing.message


def test_one_child_answers_every_read(tmp_path: Path) -> None:
    r = fake_reader(tmp_path, "ok")
    check_answers(r.read(QUERIES))
    first = r.pid
    check_answers(r.read(QUERIES))
    assert r.pid == first and r.starts == 1
    assert r.read([]) == []
    r.close()
    assert r.pid is None


def test_child_dying_mid_batch_is_restarted_and_the_batch_redone(tmp_path: Path) -> None:
    r = fake_reader(tmp_path, "die-once")
    check_answers(r.read(QUERIES))
    assert r.starts == 2
    r.close()


def test_silent_child_is_killed_and_reported(tmp_path: Path) -> None:
    r = fake_reader(tmp_path, "silent", timeout=0.3)
    with pytest.raises(FabricError, match="silent for 0.3s"):
        r.read(QUERIES)
    assert r.pid is None and r.starts == 2  # one retry with a fresh child, both killed


def test_child_that_cannot_open_its_port(tmp_path: Path) -> None:
    r = fake_reader(tmp_path, "fatal")
    with pytest.raises(FabricError, match="did not start: mad_rpc_open_port failed"):
        r.read(QUERIES)


def test_child_crashing_at_start_reports_its_stderr(tmp_path: Path) -> None:
    r = fake_reader(tmp_path, "crash")
    with pytest.raises(FabricError, match=r"exited \(rc 255\): ibpanic: \[1\] sim_init: connect failed"):
        r.read(QUERIES)
    assert r.starts == 0 and r.pid is None


def test_missing_command_is_a_fabric_error(tmp_path: Path) -> None:
    r = BatchSmpReader(cwd=tmp_path, command=(str(tmp_path / "no-such-python"),))
    with pytest.raises(FabricError, match="cannot start the SMP batch reader"):
        r.read(QUERIES)


class CannedDiag(Diag):
    """Diag whose tools print the recorded smpquery/sminfo output."""

    def run(self, args: object, extra_env: object = None) -> str:
        argv = list(args)  # type: ignore[call-overload]
        rows = json.loads((DIAGS / "smpbatch.json").read_text())["rows"]
        row = next(r for r in rows if r["tool"] == " ".join(argv))
        if row["tool_rc"]:
            raise FabricError(f"{row['tool']} failed: {row['tool_stdout'].strip()}", fabric="infiniband")
        return str(row["tool_stdout"])


def test_fallback_reader_runs_one_tool_per_query() -> None:
    got = DiagSmpReader(CannedDiag()).read(QUERIES)
    check_answers(got)


def test_both_readers_agree_on_the_recording(tmp_path: Path) -> None:
    batch = fake_reader(tmp_path, "ok").read(QUERIES)
    diag = DiagSmpReader(CannedDiag()).read(QUERIES)
    assert batch[:3] == diag[:3]
    assert all(isinstance(x, GpufabricError) for x in (batch[3], diag[3]))


@pytest.mark.parametrize("kind", ["batch", "smpquery"])
def test_make_reader(kind: str) -> None:
    r = make_reader(kind, Diag())
    assert isinstance(r, BatchSmpReader if kind == "batch" else DiagSmpReader)


def test_make_reader_rejects_unknown() -> None:
    with pytest.raises(ValidationError):
        make_reader("ssh", Diag())


@pytest.mark.parametrize(
    ("options", "reader_type", "idle"),
    [
        ({}, BatchSmpReader, 5.0),
        ({"reader": "batch", "reader_idle": "1.5", "reader_command": ["python3", "-m", "x"]}, BatchSmpReader, 1.5),
        ({"reader": "smpquery"}, DiagSmpReader, 5.0),
    ],
    ids=["default-batch", "batch-options", "smpquery"],
)
def test_driver_reader_from_options(options: dict[str, object], reader_type: type, idle: float) -> None:
    cfg = OpenSMConfig.from_options({"partitions_conf": "/x/p.conf", "log_path": "/x/o.log", **options})
    drv = OpenSMDriver(cfg)
    assert isinstance(drv.reader, reader_type)
    assert cfg.reader_idle == idle
    if isinstance(drv.reader, BatchSmpReader):
        assert drv.reader.idle_exit == idle
        assert drv.reader.command == tuple(options.get("reader_command") or (sys.executable, "-m", MODULE))  # type: ignore[arg-type]
    drv.close()


def test_driver_rejects_unknown_reader() -> None:
    with pytest.raises(ValidationError):
        OpenSMDriver(OpenSMConfig.from_options({"partitions_conf": "/p", "log_path": "/l", "reader": "ssh"}))
