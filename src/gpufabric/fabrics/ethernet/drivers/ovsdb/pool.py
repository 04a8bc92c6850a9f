"""One OVSDB connection per database server, shared by every bridge driver that talks to it.

An ``ovsdb-server`` usually holds many bridges (a lab with 32 leaves; a host with several
bridges). Opening one ovsdbapp IDL per bridge would mirror the database once per bridge
(one JSON-RPC session, one Python copy of every row, one poll thread each): 32 leaves cost
minutes of first observe and more than a GB of memory. :class:`OvsdbPool` opens ONE IDL
per ``remote`` and registers only the columns the Ethernet driver reads or writes:

* ``Open_vSwitch``: ``next_cfg``, ``cur_cfg`` (to confirm ovs-vswitchd applied a commit);
* ``Bridge``: ``name``, ``ports``;
* ``Port``: ``name``, ``vlan_mode``, ``tag``, ``trunks``, ``protected``, ``interfaces``;
* ``Interface``: ``name``, ``type``.

The pool is an ordinary object: the Ethernet backend (``EthernetKind.build``) makes one and
hands it to each :class:`~gpufabric.fabrics.ethernet.drivers.ovsdb.driver.OvsdbSwitchDriver` as its ``pool``
option; a driver built without one gets a private pool. :meth:`close` stops every
connection (a later :meth:`api` reconnects).

:func:`wait_applied` is the bounded confirmation a commit needs: it waits, in the caller's
thread (not the connection's, so bridges sharing a connection confirm in parallel), until
``Open_vSwitch.cur_cfg`` reaches the ``next_cfg`` the commit wrote.

TLS: a pool has at most one client identity (:class:`~gpufabric.transport.secrets.TlsFiles`)
for its ``ssl:`` remotes, because python-ovs has one per process
(:mod:`gpufabric.fabrics.ethernet.drivers.ovsdb.tls`): :meth:`OvsdbPool.claim_tls`, called by each
driver when it is built, refuses a second, different identity at load; :meth:`api` installs
it before opening an ``ssl:`` connection and :meth:`close` gives it back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from ovsdbapp.backend.ovs_idl import connection as ovs_connection
from ovsdbapp.backend.ovs_idl import idlutils

from gpufabric.domain.errors import ConfigError
from gpufabric.fabrics.ethernet.drivers.ovsdb import tls as ovsdb_tls
from gpufabric.transport.secrets import TlsFiles, remote_methods

COLUMNS: Mapping[str, tuple[str, ...]] = {
    "Open_vSwitch": ("next_cfg", "cur_cfg"),
    "Bridge": ("name", "ports"),
    "Port": ("name", "vlan_mode", "tag", "trunks", "protected", "interfaces"),
    "Interface": ("name", "type"),
}


class _Idl(ovs_connection.OvsdbIdl):  # type: ignore[misc]
    """ovsdbapp's IDL without its per-row ``time.sleep(0)`` (a yield for eventlet, which is not
    used here): the first monitor reply of a thousand ports would sleep two thousand times."""

    def cooperative_yield(self) -> None:
        return None


class OvsdbPool:
    """ovsdbapp APIs keyed by OVSDB remote: one connection (one IDL, one thread) each.

    ``api_base`` is the ovsdbapp API class to instantiate (the driver's, which adds the
    commented transaction); each remote gets a fresh subclass because ovsdbapp keeps the
    connection on the *class*.
    """

    def __init__(self) -> None:
        self._apis: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.connections_opened = 0
        self.tls: TlsFiles | None = None

    def claim_tls(self, tls: TlsFiles, switch: str = "") -> None:
        """Record the pool's TLS identity; ConfigError if another driver of the pool gave a different one."""
        with self._lock:
            if self.tls is not None and self.tls != tls:
                raise ConfigError(
                    "private_key", tls.private_key,
                    f"the same private_key/certificate/ca_cert for every OVSDB ssl: remote ({self.tls.private_key}"
                    f" already configured{f'; switch {switch}' if switch else ''})",
                )  # fmt: skip
            self.tls = tls

    def api(self, remote: str, timeout: float, api_base: type, tls: TlsFiles | None = None) -> Any:
        """The shared API of ``remote`` (connecting on first use; an ``ssl:`` remote with
        ``tls``, installed as python-ovs's identity first). Raises what ovsdbapp raises."""
        with self._lock:
            api = self._apis.get(remote)
            if api is None:
                if "ssl" in remote_methods(remote):
                    if tls is None:
                        raise ConfigError("remote", remote, "an ssl: remote with private_key, certificate and ca_cert")
                    ovsdb_tls.acquire(self, tls)
                helper = idlutils.get_schema_helper(remote, "Open_vSwitch")
                for table, cols in COLUMNS.items():
                    helper.register_columns(table, list(cols))
                idl = _Idl(remote, helper)
                conn = ovs_connection.Connection(idl=idl, timeout=timeout)
                api_cls = type("OvsdbPooledApi", (api_base,), {"_ovsdb_connection": None})
                api = api_cls(conn)
                self._apis[remote] = api
                self.connections_opened += 1
            return api

    def remotes(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._apis)

    def close(self, timeout: float = 10.0) -> None:
        """Stop every connection thread."""
        with self._lock:
            apis, self._apis = list(self._apis.values()), {}
        for api in apis:
            api.ovsdb_connection.stop(timeout=timeout)
        ovsdb_tls.release(self)


def cur_cfg(api: Any) -> int:
    """``Open_vSwitch.cur_cfg`` from the IDL cache."""
    with api.ovsdb_connection.lock:
        rows = list(api.tables["Open_vSwitch"].rows.values())
        return int(rows[0].cur_cfg) if rows else 0


def wait_applied(api: Any, next_cfg: int, timeout: float) -> float:
    """Wait until ovs-vswitchd reports ``cur_cfg >= next_cfg``; returns the seconds waited.
    Raises TimeoutError after ``timeout`` seconds."""
    t0 = time.monotonic()
    delay = 0.001
    while cur_cfg(api) < next_cfg:
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"ovs-vswitchd did not apply configuration {next_cfg} within {timeout}s")
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    return time.monotonic() - t0
