"""Batch SMP reader process: many SMP queries through ONE libibmad port (no smpquery per query).

Run as ``python -m gpufabric.fabrics.infiniband.drivers.opensm.smpbatch [--timeout-ms N] [--retries N] [--m-key-stdin]``
with the environment the infiniband-diags get (in the lab ``LD_PRELOAD=libumad2sim.so``,
``IBSIM_SOCKNAME``, ``SIM_HOST``; on a real SM host nothing: libibumad opens the first
active local port, as smpquery does). It loads ``libibmad.so.5`` (Debian libibmad5, a
dependency of infiniband-diags) with ctypes, opens the port once
(``mad_rpc_open_port(NULL, 0, {SMI, DirectedSMI, SA})`` like smpquery) and answers
requests on stdin, one JSON line per batch::

    -> {"q": [["pkeys", LID, PORT], ["portinfo", LID, PORT], ["nodeinfo", LID, 0], ["sminfo", LID, 0]]}
    <- {"ok": 1, "raw": {"nodeinfo": HEX, "pkeys": [HEX, ...]}}     one line per query, in order
    <- {"ok": 0, "error": "pkey table query failed"}
    <- {"done": N}

It issues the same SMPs in the same order as ``smpquery pkeys|portinfo|nodeinfo`` and
``sminfo LID`` (pkeys: NodeInfo for PartitionCap - SwitchInfo for switch ports > 0 - then
every 32-entry P_KeyTable block) and returns the raw 64-byte attribute data as hex;
decoding is the caller's (:mod:`~gpufabric.fabrics.infiniband.readers.smp`, pure). With ``--m-key-stdin`` the first line
on stdin is ``{"m_key": "0x..."}``, read before the port opens: the M_Key every SMP carries
(``smp_mkey_set``, what ``smpquery -y`` does) reaches this process over its stdin pipe,
never on its command line, where ``ps`` shows it to every local user. The first line it writes is
``{"ready": PID}`` once the port is open, or ``{"fatal": "..."}`` (exit 2). EOF on stdin,
or no request for ``--idle-exit`` seconds: close the port and exit 0 (umad2sim then
disconnects from ibsim - which has only 10 client slots - and removes its ``./sys-<pid>/``).

Written against libibmad 44 (rdma-core); tested on ibsim (tests/fabrics/infiniband/functional/test_ib_smpbatch.py).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import sys
from collections.abc import Callable
from typing import IO, Any

from gpufabric.fabrics.infiniband.readers import smp as d

LIBIBMAD = "libibmad.so.5"
IB_SMI_CLASS, IB_SMI_DIRECT_CLASS, IB_SA_CLASS = 0x01, 0x81, 0x03
ATTR_NODE_INFO, ATTR_SWITCH_INFO, ATTR_PORT_INFO, ATTR_PKEY_TBL, ATTR_SMINFO = 0x11, 0x12, 0x15, 0x16, 0x20
BUF_SIZE = 256  # >= IB_SMP_DATA_SIZE; libibmad copies 64 bytes in and out


class _DrPath(ctypes.Structure):
    _fields_ = [
        ("cnt", ctypes.c_int),
        ("p", ctypes.c_uint8 * 64),
        ("drslid", ctypes.c_uint16),
        ("drdlid", ctypes.c_uint16),
    ]


class _PortId(ctypes.Structure):  # ib_portid_t of <infiniband/mad.h>
    _fields_ = [
        ("lid", ctypes.c_int),
        ("drpath", _DrPath),
        ("grh_present", ctypes.c_int),
        ("gid", ctypes.c_uint8 * 16),
        ("qp", ctypes.c_uint32),
        ("qkey", ctypes.c_uint32),
        ("sl", ctypes.c_uint8),
        ("pkey_idx", ctypes.c_uint),
    ]


class SmpPort:
    """One open libibmad port; :meth:`get` = ``smp_query_via`` (None when it fails)."""

    def __init__(self, timeout_ms: int = 0, retries: int = 0, m_key: int = 0) -> None:
        lib = ctypes.CDLL(LIBIBMAD)
        lib.mad_rpc_open_port.restype = ctypes.c_void_p
        lib.mad_rpc_open_port.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        lib.mad_rpc_close_port.argtypes = [ctypes.c_void_p]
        lib.mad_rpc_set_timeout.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.mad_rpc_set_retries.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.smp_mkey_set.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        lib.smp_query_via.restype = ctypes.c_void_p
        lib.smp_query_via.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(_PortId),
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
        ]
        classes = (ctypes.c_int * 3)(IB_SMI_CLASS, IB_SMI_DIRECT_CLASS, IB_SA_CLASS)
        port = lib.mad_rpc_open_port(None, 0, classes, 3)
        if not port:
            raise OSError("mad_rpc_open_port failed (no usable local IB port / umad device)")
        if timeout_ms > 0:
            lib.mad_rpc_set_timeout(port, timeout_ms)
        if retries > 0:
            lib.mad_rpc_set_retries(port, retries)
        if m_key:
            lib.smp_mkey_set(port, m_key)  # what smpquery -y does: the M_Key of every SMP sent
        self._lib, self._port = lib, port
        self._buf = ctypes.create_string_buffer(BUF_SIZE)

    def get(self, lid: int, attr: int, mod: int, payload: bytes = b"") -> bytes | None:
        ctypes.memset(self._buf, 0, BUF_SIZE)
        if payload:
            ctypes.memmove(self._buf, payload, len(payload))
        portid = _PortId()
        portid.lid = lid
        if not self._lib.smp_query_via(self._buf, ctypes.byref(portid), attr, mod, 0, self._port):
            return None
        return self._buf.raw[: d.SMP_DATA_SIZE]

    def close(self) -> None:
        if self._port:
            self._lib.mad_rpc_close_port(self._port)
            self._port = None


class QueryFailed(Exception):
    pass


def _need(raw: bytes | None, why: str) -> bytes:
    if raw is None:
        raise QueryFailed(why)
    return raw


def _pkeys(port: SmpPort, lid: int, portnum: int) -> dict[str, Any]:
    ni = _need(port.get(lid, ATTR_NODE_INFO, 0), "node info query failed")
    out: dict[str, Any] = {"nodeinfo": ni.hex()}
    if portnum > d.num_ports(ni):
        raise QueryFailed("invalid port number")
    if d.node_type(ni) == d.NODE_SWITCH and portnum != 0:
        si = _need(port.get(lid, ATTR_SWITCH_INFO, 0), "switch info failed")
        out["switchinfo"] = si.hex()
        cap = d.switch_partition_cap(si)
    else:
        cap = d.partition_cap(ni)
    out["pkeys"] = [
        _need(port.get(lid, ATTR_PKEY_TBL, d.pkey_modifier(i, portnum)), "pkey table query failed").hex()
        for i in range(d.pkey_blocks(cap))
    ]
    return out


def _portinfo(port: SmpPort, lid: int, portnum: int) -> dict[str, Any]:
    return {"portinfo": _need(port.get(lid, ATTR_PORT_INFO, portnum), "port info query failed").hex()}


def _nodeinfo(port: SmpPort, lid: int, portnum: int) -> dict[str, Any]:
    return {"nodeinfo": _need(port.get(lid, ATTR_NODE_INFO, 0), "node info query failed").hex()}


def _sminfo(port: SmpPort, lid: int, portnum: int) -> dict[str, Any]:
    raw = port.get(lid, ATTR_SMINFO, 0, d.sminfo_request())
    return {"sminfo": _need(raw, "sminfo query failed").hex()}


OPS: dict[str, Callable[[SmpPort, int, int], dict[str, Any]]] = {
    "pkeys": _pkeys,
    "portinfo": _portinfo,
    "nodeinfo": _nodeinfo,
    "sminfo": _sminfo,
}


def answer(port: SmpPort, query: Any) -> dict[str, Any]:
    """One query ``[op, lid, port]`` -> its response object."""
    try:
        op, lid, portnum = query
        fn = OPS[op]
        if not (isinstance(lid, int) and isinstance(portnum, int) and 0 < lid < 0xC000 and 0 <= portnum < 255):
            raise QueryFailed(f"bad lid/port {lid!r}/{portnum!r}")
    except (TypeError, ValueError, KeyError):
        return {"ok": 0, "error": f"bad query {query!r}"}
    except QueryFailed as e:
        return {"ok": 0, "error": str(e)}
    try:
        return {"ok": 1, "raw": fn(port, lid, portnum)}
    except QueryFailed as e:
        return {"ok": 0, "error": str(e)}


def serve(port: SmpPort, fd: int, out: IO[str], idle_exit: float = 0.0) -> None:
    """Answer request lines from ``fd`` until EOF, or until none came for ``idle_exit`` s."""
    buf = b""
    while True:
        while b"\n" not in buf:
            if idle_exit > 0 and not select.select([fd], [], [], idle_exit)[0]:
                return
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        if not line.strip():
            continue
        try:
            queries = json.loads(line)["q"]
        except (ValueError, KeyError, TypeError):
            out.write(json.dumps({"fatal": "bad request line"}) + "\n")
            out.flush()
            return
        for q in queries:
            out.write(json.dumps(answer(port, q), separators=(",", ":")) + "\n")
            out.flush()
        out.write(json.dumps({"done": len(queries)}) + "\n")
        out.flush()


def read_m_key(fd: int) -> int:
    """The M_Key of the first line on ``fd`` (``{"m_key": "0x..."}``), read a byte at a time
    so that nothing after it is taken from the request stream; ValueError when it is not one."""
    line = b""
    while not line.endswith(b"\n"):
        b = os.read(fd, 1)
        if not b or len(line) > 256:
            raise ValueError("no M_Key line on stdin")
        line += b
    try:
        key = int(json.loads(line)["m_key"], 0)
    except (ValueError, KeyError, TypeError):
        raise ValueError("the first stdin line is not {\"m_key\": \"0x...\"}") from None
    if not 0 < key < 1 << 64:
        raise ValueError("the M_Key is not a non-zero 64-bit key")
    return key


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="smpbatch", description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--timeout-ms", type=int, default=0, help="MAD timeout (0: libibmad's default)")
    ap.add_argument("--retries", type=int, default=0, help="MAD retries (0: libibmad's default)")
    ap.add_argument("--idle-exit", type=float, default=0.0, help="exit after this many idle seconds (0: never)")
    ap.add_argument("--m-key-stdin", action="store_true", help='the first stdin line is {"m_key": "0x..."}')
    a = ap.parse_args(argv)
    try:
        m_key = read_m_key(sys.stdin.fileno()) if a.m_key_stdin else 0
        port = SmpPort(a.timeout_ms, a.retries, m_key)
    except (OSError, ValueError) as e:
        sys.stdout.write(json.dumps({"fatal": str(e)}) + "\n")
        sys.stdout.flush()
        return 2
    sys.stdout.write(json.dumps({"ready": os.getpid()}) + "\n")
    sys.stdout.flush()
    try:
        serve(port, sys.stdin.fileno(), sys.stdout, a.idle_exit)
    finally:
        port.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
