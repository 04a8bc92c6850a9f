"""SMP readers for the OpenSM driver: the batch reader (one process) and the smpquery fallback.

Both answer :meth:`SmpReader.read` - a list of :class:`SmpQuery` (``pkeys`` / ``portinfo``
/ ``nodeinfo`` / ``sminfo`` of a LID and port) -> the same models, in order
(:class:`PkeyDump`, :class:`PortInfo`, :class:`NodeInfo`, :class:`SmSeen`), a failed query
as a :class:`GpufabricError` in its place:

- :class:`BatchSmpReader` ("batch", the default): ONE ``python -m
  gpufabric.fabrics.infiniband.drivers.opensm.smpbatch`` child per driver that sends every query of a
  read through one libibmad port; raw attribute data is decoded here by :mod:`~gpufabric.fabrics.infiniband.readers.smp`.
  The child is started lazily with the diag env/prefix/cwd, reused by the reads that
  follow (a move's observes and verification polls), exits by itself after ``idle_exit``
  seconds without a request (a umad client holds one of ibsim's 10 client slots), and is
  stopped by :meth:`close` or when the reader is collected. A child that died is replaced
  and the batch redone once; one silent for ``timeout`` seconds is killed (by its PID).
- :class:`DiagSmpReader` ("smpquery"): one ``smpquery``/``sminfo`` process per query on
  the :class:`Diag` thread pool (~20-100 ms each).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from gpufabric.domain.errors import FabricError, GpufabricError, ValidationError
from gpufabric.fabrics.infiniband.drivers.opensm.diag import Diag
from gpufabric.fabrics.infiniband.readers import smp as d
from gpufabric.fabrics.infiniband.readers.diags import NodeInfo, PkeyDump, PortInfo
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import CaPort
from gpufabric.fabrics.infiniband.state import SmSeen
from gpufabric.transport.secrets import Secret

FABRIC = "infiniband"
Op = Literal["pkeys", "portinfo", "nodeinfo", "sminfo"]
SmpValue = PkeyDump | PortInfo | NodeInfo | SmSeen
MODULE = "gpufabric.fabrics.infiniband.drivers.opensm.smpbatch"


@dataclass(frozen=True)
class SmpQuery:
    op: Op
    lid: int
    port: int = 0


class SmpReader(Protocol):
    def read(self, queries: Sequence[SmpQuery]) -> list[SmpValue | GpufabricError]: ...

    def close(self) -> None: ...


class DiagSmpReader:
    """One infiniband-diags process per query, ``diag.workers`` at a time (the fallback)."""

    def __init__(self, diag: Diag) -> None:
        self.diag = diag

    def _one(self, q: SmpQuery) -> SmpValue:
        if q.op == "pkeys":
            return self.diag.pkeys(q.lid, q.port)
        if q.op == "portinfo":
            return self.diag.portinfo(q.lid, q.port)
        if q.op == "nodeinfo":
            return self.diag.nodeinfo(q.lid)
        return self.diag.sminfo(q.lid)

    def read(self, queries: Sequence[SmpQuery]) -> list[SmpValue | GpufabricError]:
        return self.diag.map(self._one, queries)

    def close(self) -> None:
        pass


def decode(q: SmpQuery, raw: Mapping[str, Any]) -> SmpValue:
    """A batch response's raw attribute data (hex) -> the model smpquery/sminfo would give."""
    b = {k: ([bytes.fromhex(x) for x in v] if isinstance(v, list) else bytes.fromhex(v)) for k, v in raw.items()}
    if q.op == "pkeys":
        sw = b.get("switchinfo")
        cap = d.switch_partition_cap(sw) if isinstance(sw, bytes) else d.partition_cap(_one(b, "nodeinfo"))
        blocks = b.get("pkeys")
        return d.decode_pkey_table(cap, blocks if isinstance(blocks, list) else [])
    if q.op == "portinfo":
        return d.decode_portinfo(_one(b, "portinfo"))
    if q.op == "nodeinfo":
        return d.decode_nodeinfo(_one(b, "nodeinfo"))
    return d.decode_sminfo(_one(b, "sminfo"), q.lid)


def _one(b: Mapping[str, bytes | list[bytes]], key: str) -> bytes:
    v = b.get(key)
    if not isinstance(v, bytes):
        raise ValidationError("smpbatch response", sorted(b), f"a {key} buffer")
    return v


class _Child:
    """The running smpbatch process (stdout read with a silence timeout)."""

    def __init__(
        self, argv: list[str], env: dict[str, str], cwd: Path | None, timeout: float, key_line: bytes = b""
    ) -> None:
        self.timeout = timeout
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child
        try:
            self.proc = subprocess.Popen(
                argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr
            )
        except OSError as e:
            self.stderr.close()
            raise FabricError(f"cannot start the SMP batch reader {argv[0]}: {e}", fabric=FABRIC) from None
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout
        self._buf = b""
        try:
            if key_line:  # the M_Key line, on the pipe before anything else
                self.stdin.write(key_line)
                self.stdin.flush()
        except OSError:
            pass  # the child is gone: its exit is read below
        try:
            first = self.line()
        except FabricError:
            self.stop(grace=0.0)
            raise
        if "ready" not in first:
            self.stop()
            raise FabricError(f"SMP batch reader did not start: {first.get('fatal', first)}", fabric=FABRIC)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def line(self) -> dict[str, Any]:
        """The next JSON line; FabricError when the child is silent for ``timeout`` or exits."""
        fd = self.stdout.fileno()
        while b"\n" not in self._buf:
            ready, _, _ = select.select([fd], [], [], self.timeout)
            if not ready:
                self.stop(grace=0.0)
                raise FabricError(f"SMP batch reader silent for {self.timeout}s (killed)", fabric=FABRIC)
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                rc = self.proc.wait()
                raise FabricError(f"SMP batch reader exited (rc {rc}): {self.stderr_tail()}", fabric=FABRIC)
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            out = json.loads(line)
        except ValueError:
            raise FabricError(f"SMP batch reader wrote {line[:80]!r}", fabric=FABRIC) from None
        if not isinstance(out, dict):
            raise FabricError(f"SMP batch reader wrote {line[:80]!r}", fabric=FABRIC)
        return out

    def stderr_tail(self) -> str:
        try:
            self.stderr.seek(0)
            lines = self.stderr.read().decode(errors="replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return lines[-1] if lines else ""

    def stop(self, grace: float = 5.0) -> None:
        """EOF -> the child closes its port and exits; killed (this PID only) if it has not
        within ``grace`` seconds."""
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stdout.close()
        self.stderr.close()


class BatchSmpReader:
    """Every query of a read through one smpbatch child (see module docstring)."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
        cwd: Path | None = None,
        timeout: float = 20.0,
        smp_timeout_ms: int = 0,
        command: Sequence[str] = (),
        idle_exit: float = 5.0,
        m_key: Secret | None = None,
    ) -> None:
        self.m_key = m_key  # handed to the child on its stdin (--m-key-stdin), never on argv
        self.env = dict(env or {})
        self.prefix = tuple(prefix)
        self.cwd = cwd
        self.timeout = timeout
        self.smp_timeout_ms = smp_timeout_ms
        self.command = tuple(command) or (sys.executable, "-m", MODULE)
        self.idle_exit = idle_exit  # the child exits when idle that long (0: never)
        self._last_use = 0.0
        self.starts = 0  # children started (tests, logs)
        self.last_seconds = 0.0  # duration of the last read
        self._lock = threading.Lock()
        self._holder: list[_Child | None] = [None]  # shared with the finalizer
        weakref.finalize(self, BatchSmpReader._stop, self._holder)

    @staticmethod
    def _stop(holder: list[_Child | None]) -> None:
        child, holder[0] = holder[0], None
        if child is not None:
            child.stop()

    @property
    def pid(self) -> int | None:
        """PID of the running child, if any."""
        c = self._holder[0]
        return c.proc.pid if c is not None and c.alive() else None

    def _ensure(self) -> _Child:
        c = self._holder[0]
        fresh = not self.idle_exit or time.monotonic() - self._last_use < 0.8 * self.idle_exit
        if c is not None and c.alive() and fresh:
            return c
        self._stop(self._holder)  # gone, or about to exit idle: a new one
        argv = [*self.prefix, *self.command]
        if self.smp_timeout_ms:
            argv += ["--timeout-ms", str(self.smp_timeout_ms)]
        if self.idle_exit:
            argv += ["--idle-exit", str(self.idle_exit)]
        key_line = b""
        if self.m_key is not None:
            argv.append("--m-key-stdin")
            key_line = json.dumps({"m_key": self.m_key.reveal()}).encode() + b"\n"
        env = dict(os.environ)
        env.update(self.env)
        if self.cwd is not None:
            self.cwd.mkdir(parents=True, exist_ok=True)
        c = self._holder[0] = _Child(argv, env, self.cwd, self.timeout, key_line)
        self.starts += 1
        self._last_use = time.monotonic()  # a child just started is fresh (a warm() start is kept)
        return c

    def warm(self) -> None:
        """Have a child ready for the next read, its idle clock reset (called while an apply
        waits for OpenSM's sweep, which at thousands of ports outlasts ``idle_exit``: the read
        that follows does not wait for a new process). Cheap when the child is fresh; skipped
        when another thread holds the reader; a failure is left for that read to meet."""
        if self._holder[0] is not None and time.monotonic() - self._last_use < 0.4 * (self.idle_exit or 1e9):
            return
        if not self._lock.acquire(blocking=False):
            return
        try:
            c = self._holder[0]
            if c is not None and c.alive() and time.monotonic() - self._last_use < 0.8 * (self.idle_exit or 1e9):
                self._exchange([])  # an empty batch, answered {"done": 0}: the child's idle clock restarts
            else:
                self._ensure()  # none, gone, or about to exit idle: a new one now
        except FabricError:
            self._stop(self._holder)
        finally:
            self._lock.release()

    def close(self) -> None:
        """Stop the child (a later read starts a new one)."""
        with self._lock:
            self._stop(self._holder)

    def read(self, queries: Sequence[SmpQuery]) -> list[SmpValue | GpufabricError]:
        if not queries:
            return []
        with self._lock:
            try:
                return self._exchange(queries)
            except FabricError:
                self._stop(self._holder)  # died or hung mid-batch: one fresh child, whole batch again
            return self._exchange(queries)

    def _exchange(self, queries: Sequence[SmpQuery]) -> list[SmpValue | GpufabricError]:
        child = self._ensure()
        try:
            child.stdin.write(json.dumps({"q": [[q.op, q.lid, q.port] for q in queries]}).encode() + b"\n")
            child.stdin.flush()
        except OSError as e:
            raise FabricError(f"SMP batch reader gone: {e}", fabric=FABRIC) from None
        t0 = time.monotonic()
        out: list[SmpValue | GpufabricError] = []
        for q in queries:
            r = child.line()
            if r.get("ok") == 1:
                try:
                    out.append(decode(q, r.get("raw") or {}))
                except GpufabricError as e:
                    out.append(e)
            else:
                err = str(r.get("error") or r.get("fatal") or r)
                out.append(FabricError(f"{q.op} {q.lid} {q.port} failed: {err}", fabric=FABRIC, query=q.op))
        done = child.line()
        if done.get("done") != len(queries):
            raise FabricError(f"SMP batch reader out of step: {done}", fabric=FABRIC)
        self._last_use = time.monotonic()
        self.last_seconds = self._last_use - t0
        return out


def read_pkeys(reader: SmpReader, ports: Sequence[CaPort]) -> list[PkeyDump | GpufabricError]:
    """PKey tables of ``ports`` in one read."""
    out: list[PkeyDump | GpufabricError] = []
    for r in reader.read([SmpQuery("pkeys", p.lid, p.port_num) for p in ports]):
        if isinstance(r, PkeyDump | GpufabricError):
            out.append(r)
        else:
            out.append(FabricError(f"reader answered {type(r).__name__} to pkeys", fabric=FABRIC))
    return out


def keep_warm(reader: SmpReader) -> None:
    """:meth:`BatchSmpReader.warm` (nothing for the smpquery fallback or other readers)."""
    if isinstance(reader, BatchSmpReader):
        reader.warm()


def make_reader(kind: str, diag: Diag, command: Sequence[str] = (), idle_exit: float = 5.0) -> SmpReader:
    """``batch`` (one smpbatch process) or ``smpquery`` (a process per query)."""
    if kind == "smpquery":
        return DiagSmpReader(diag)
    if kind == "batch":
        return BatchSmpReader(
            diag.env, diag.prefix, diag.cwd, diag.timeout, diag.smp_timeout_ms, command, idle_exit, diag.m_key
        )
    raise ValidationError("reader", kind, "batch | smpquery")
