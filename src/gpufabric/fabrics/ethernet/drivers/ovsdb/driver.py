"""Ethernet switch driver for one Open vSwitch bridge, spoken over OVSDB (ovsdbapp).

Owns the OVSDB connection to one ``ovsdb-server`` and the translation of a batch of
:class:`EthernetPortConfig` into *one* OVSDB transaction. The column mapping and the
VLAN policy (never untagged, never VLAN 1, how SHUTDOWN is realised) live in
:mod:`gpufabric.fabrics.ethernet.readers.ovs_columns`.

* ``observe()`` reads every port of the bridge from the IDL cache (the bridge's own
  internal port and patch ports are left out unless asked for).
* ``apply(changes)`` validates every change, then runs a single command inside a single
  ``api.transaction(check_error=True)``. The command checks, inside the transaction and
  against the live IDL, that every port belongs to this bridge; an unknown port raises
  before the commit, the transaction is aborted and nothing is written. The transaction
  carries the comment ``gpufabric: apply <n> port(s) on <bridge>`` which ovsdb-server
  records in its log (``ovsdb-tool show-log``), so the number of transactions can be
  checked from OVS itself; ``transactions`` counts them on the client side. The call
  returns once ovs-vswitchd has applied the new configuration: the transaction bumps
  ``Open_vSwitch.next_cfg`` and the caller's thread waits (bounded by ``timeout``) until
  ``cur_cfg`` reaches it, else ApplyError.
  Every listed column of every listed port is written, but the OVS IDL sends a
  transaction only if some value really differs: re-applying a batch that is already in
  place sends nothing (``transactions`` and the log do not move).

Connections: drivers given the same ``pool`` (an :class:`OvsdbPool`; the Ethernet backend
makes one per fabric) share one OVSDB connection per ``remote``, monitoring only the
columns the driver needs (see :mod:`gpufabric.fabrics.ethernet.drivers.ovsdb.pool`).

Transport: ``unix:`` (a root-only socket on the same host), ``ssl:`` (TLS; the driver's
``private_key``, ``certificate`` and ``ca_cert`` options are required, checked at load and
installed into python-ovs before connecting, see :mod:`gpufabric.fabrics.ethernet.drivers.ovsdb.tls`)
or ``tcp:`` (plain: unencrypted and unauthenticated; accepted, and reported by
:meth:`OvsdbSwitchDriver.transport_notes` as the audit's ``TRANSPORT-INSECURE``).

Tested against a private ovsdb-server/ovs-vswitchd (userspace datapath): the Ethernet
contract suite, tests/fabrics/ethernet/functional/test_ovsdb_driver.py, test_ovsdb_tls.py (a ``pssl:``
server with certificates made by the test) and the ping data-plane test.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Sequence
from typing import Any

from ovsdbapp.backend.ovs_idl import command as ovs_command
from ovsdbapp.backend.ovs_idl import transaction as ovs_transaction
from ovsdbapp.schema.open_vswitch import impl_idl

from gpufabric.domain.errors import ApplyError, ConfigError, FabricError, GpufabricError, ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.base import TRUNKS, EthernetSwitchDriver
from gpufabric.fabrics.ethernet.drivers.ovsdb import tls as ovsdb_tls
from gpufabric.fabrics.ethernet.drivers.ovsdb.pool import OvsdbPool, wait_applied
from gpufabric.fabrics.ethernet.drivers.ovsdb.tls import probe_ssl
from gpufabric.fabrics.ethernet.readers.ovs_columns import (
    PortColumns,
    check_port_config,
    check_quarantine_vlan,
    columns_for,
    config_from_columns,
)
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, SwitchState
from gpufabric.transport.secrets import TlsFiles, TransportNote, load_tls, plain_remote_notes, remote_methods

FABRIC = "ethernet"
COMMENT_PREFIX = "gpufabric: apply"


def _one(value: Any) -> Any:
    """An optional OVSDB column (a list of 0 or 1 element in the Python IDL) as a value or None."""
    if isinstance(value, list):
        return value[0] if value else None
    return value


class _CommentedTransaction(impl_idl.OvsVsctlTransaction):  # type: ignore[misc]
    """ovsdbapp's vsctl-like transaction (bumps ``next_cfg``), plus a log comment. It does NOT
    wait for vswitchd in the connection thread (which bridges sharing the connection would
    queue behind): it records ``next_cfg`` and the caller waits (:func:`wait_applied`)."""

    def __init__(self, *args: Any, comment: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.comment = comment
        self.committed = False  # True once ovsdb-server committed it (not for an UNCHANGED no-op)
        self.next_cfg = 0

    def pre_commit(self, txn: Any) -> None:
        super().pre_commit(txn)
        if self.comment:
            txn.add_comment(self.comment)

    def post_commit(self, txn: Any) -> None:
        self.committed = True  # ovsdbapp calls this only for a SUCCESS commit
        self.next_cfg = int(txn.get_increment_new_value())
        ovs_transaction.Transaction.post_commit(self, txn)


class _Api(impl_idl.OvsdbIdl):  # type: ignore[misc]
    """Base of the per-driver API classes (ovsdbapp keeps the connection as a *class* attribute)."""

    def create_transaction(self, check_error: bool = False, log_errors: bool = True, **kwargs: Any) -> Any:
        return _CommentedTransaction(
            self,
            self.ovsdb_connection,
            check_error=check_error,
            log_errors=log_errors,
            comment=kwargs.get("comment", ""),
        )


class _ApplyPorts(ovs_command.BaseCommand):  # type: ignore[misc]
    """Set the VLAN columns of many ports of one bridge, all inside the caller's transaction."""

    def __init__(self, api: Any, bridge: str, columns: dict[str, PortColumns]) -> None:
        super().__init__(api)
        self.bridge = bridge
        self.columns = columns

    def run_idl(self, txn: Any) -> None:
        ports = _bridge_ports(self.api, self.bridge)
        unknown = sorted(set(self.columns) - set(ports))
        if unknown:
            raise ApplyError(
                f"unknown port(s) on switch {self.bridge}: {', '.join(unknown)}; nothing changed",
                fabric=FABRIC,
                device=self.bridge,
                ports=unknown,
            )
        for name, cols in self.columns.items():
            row = ports[name]
            row.vlan_mode = [cols.vlan_mode]
            row.tag = [] if cols.tag is None else [cols.tag]
            row.trunks = list(cols.trunks)
            row.protected = cols.protected
        self.result = len(self.columns)


def _bridge_ports(api: Any, bridge: str) -> dict[str, Any]:
    """The Port rows of ``bridge`` by name (from the IDL; call with the connection lock held)."""
    for br in api.tables["Bridge"].rows.values():
        if br.name == bridge:
            return {p.name: p for p in br.ports}
    raise FabricError(f"bridge not found: {bridge}", fabric=FABRIC, device=bridge)


def probe_ovsdb(remote: str, timeout: float, switch: str = "", tls: TlsFiles | None = None) -> None:
    """One JSON-RPC ``echo`` to the OVSDB server (over TLS for ``ssl:``, with ``tls``), bounded
    by ``timeout``: ovsdbapp's first schema fetch has no timeout of its own, so a server that
    accepts but never answers (hung, stopped) would hang the caller forever, and a TLS failure
    (wrong CA) would only say "could not retrieve schema". Raises FabricError naming the remote.
    A remote of several comma-separated parts is left to ovsdbapp (it tries each in turn)."""
    kind, _, where = remote.partition(":")
    if kind not in ("unix", "tcp", "ssl") or "," in remote:
        return
    try:
        if kind == "ssl":
            host, _, port = where.rpartition(":")
            assert tls is not None  # the driver refuses ssl: without TLS files
            reply = probe_ssl(host.strip("[]"), int(port), tls, timeout)
        else:
            if kind == "unix":
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                address: Any = where
            else:
                host, _, port = where.rpartition(":")
                sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
                address = (host.strip("[]"), int(port))
            with sock:
                sock.settimeout(timeout)
                sock.connect(address)
                sock.sendall(json.dumps({"method": "echo", "params": ["gpufabric"], "id": "probe"}).encode())
                reply = sock.recv(4096)
    except ssl.SSLError as e:
        raise FabricError(f"OVSDB at {remote}: TLS refused: {e}", fabric=FABRIC, device=switch) from e
    except (OSError, ValueError) as e:
        raise FabricError(
            f"OVSDB at {remote} did not answer within {timeout}s: {e}", fabric=FABRIC, device=switch
        ) from e
    if b"probe" not in reply:
        raise FabricError(f"OVSDB at {remote} gave no echo reply", fabric=FABRIC, device=switch)


class OvsdbSwitchDriver(EthernetSwitchDriver):
    """One OVS bridge as an Ethernet switch, driven over OVSDB.

    ``remote`` is an OVSDB connection string (``unix:/path/db.sock``, ``ssl:host:6640``,
    ``tcp:host:6640``); ``private_key``/``certificate``/``ca_cert`` (PEM files, all three, the
    key mode 0600) are required for ``ssl:`` and refused otherwise.
    ``quarantine_vlan`` is the VLAN a SHUTDOWN port is parked in (never carried by a trunk).
    ``transactions`` counts OVSDB transactions :meth:`apply` committed (a batch that is
    already in place commits none).
    """

    capabilities = frozenset({TRUNKS})  # reads its trunks with the patch ports its observe leaves out

    def __init__(
        self,
        switch: str,
        remote: str,
        quarantine_vlan: VlanId | int | str,
        timeout: float = 10.0,
        *,
        include_bridge_port: bool = False,
        include_patch_ports: bool = False,
        pool: OvsdbPool | None = None,
        private_key: str | None = None,
        certificate: str | None = None,
        ca_cert: str | None = None,
    ) -> None:
        if not switch:
            raise ValidationError("switch", switch, "an OVS bridge name")
        if not remote:
            raise ValidationError("remote", remote, "an OVSDB connection string, e.g. unix:/run/openvswitch/db.sock")
        if timeout <= 0:
            raise ValidationError("timeout", timeout, "> 0 seconds")
        methods = remote_methods(remote)
        if not methods or any(m not in ("unix", "tcp", "ssl") for m in methods):
            raise ConfigError("remote", remote, "unix:/path, ssl:HOST:PORT or tcp:HOST:PORT (comma-separated)")
        self.tls = load_tls("", private_key, certificate, ca_cert)
        if "ssl" in methods and self.tls is None:
            raise ConfigError("private_key", None, "private_key, certificate and ca_cert for an ssl: remote")
        if self.tls is not None and "ssl" not in methods:
            raise ConfigError("private_key", private_key, "only with an ssl: remote (this remote is not TLS)")
        self._switch = switch
        self.remote = remote
        self.quarantine_vlan = check_quarantine_vlan(quarantine_vlan)
        self.timeout = timeout
        self.include_bridge_port = include_bridge_port
        self.include_patch_ports = include_patch_ports
        self.transactions = 0
        self.pool = pool if pool is not None else OvsdbPool()
        self._own_pool = pool is None
        if self.tls is not None:
            self.pool.claim_tls(self.tls, switch)
        self._api: Any = None
        self._lock = threading.Lock()

    @property
    def switch(self) -> str:
        return self._switch

    def describe(self) -> str:
        return f"OVSDB {self.remote}" + (" (TLS verified against ca_cert)" if self.tls is not None else "")

    def trunks(self) -> dict[str, frozenset[int] | None]:
        """Every trunk port of the bridge, patch ports included (the lab's and a typical OVS
        leaf's uplinks); an empty ``trunks`` column carries every VLAN (None)."""
        api = self._connect()
        with api.ovsdb_connection.lock:
            rows = _bridge_ports(api, self.switch)
            raw = {n: (list(r.vlan_mode), [int(t) for t in r.trunks], list(r.tag)) for n, r in rows.items()}
        out: dict[str, frozenset[int] | None] = {}
        for name, (mode, trunks, tag) in raw.items():
            if (mode and mode[0] == "trunk") or (not mode and not tag and name != self.switch):
                out[name] = frozenset(trunks) if trunks else None
        return out

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """A ``tcp:`` remote (plain, unauthenticated OVSDB), for the audit's TRANSPORT-INSECURE."""
        return plain_remote_notes(self.switch, self.remote, f"OVSDB of switch {self.switch}")

    # ----------------------------------------------------------------- connection
    def _connect(self) -> Any:
        with self._lock:
            if self._api is None:
                if self.tls is not None:  # a configuration conflict, before any I/O
                    ovsdb_tls.check(self.pool, self.tls)
                probe_ovsdb(self.remote, self.timeout, self.switch, self.tls)
                try:
                    self._api = self.pool.api(self.remote, self.timeout, _Api, self.tls)
                except ConfigError:
                    raise
                except Exception as e:
                    raise FabricError(
                        f"cannot connect to OVSDB at {self.remote}: {e}", fabric=FABRIC, device=self.switch
                    ) from e
            return self._api

    def close(self) -> None:
        """Stop the OVSDB connection thread if this driver owns it (a shared pool is closed by
        its owner); the driver reconnects on next use."""
        with self._lock:
            if self._api is not None and self._own_pool:
                self.pool.close(timeout=self.timeout)
            self._api = None

    def __enter__(self) -> OvsdbSwitchDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- observe
    def observe(self) -> SwitchState:
        api = self._connect()
        with api.ovsdb_connection.lock:
            ports = _bridge_ports(api, self.switch)
            raw = [(name, self._columns_of(row), self._kinds(row)) for name, row in ports.items()]
        configs = [
            config_from_columns(self.switch, name, cols, self.quarantine_vlan)
            for name, cols, kinds in sorted(raw, key=lambda r: r[0])
            if self._wanted(name, kinds)
        ]
        return SwitchState(switch=self.switch, ports=tuple(configs))

    @staticmethod
    def _columns_of(row: Any) -> PortColumns:
        return PortColumns(
            vlan_mode=_one(row.vlan_mode) or "",
            tag=_one(row.tag),
            trunks=tuple(int(t) for t in row.trunks),
            protected=bool(row.protected),
        )

    @staticmethod
    def _kinds(row: Any) -> frozenset[str]:
        return frozenset(str(i.type) for i in row.interfaces)

    def _wanted(self, name: str, kinds: frozenset[str]) -> bool:
        if name == self.switch and not self.include_bridge_port:
            return False
        return not ("patch" in kinds and not self.include_patch_ports)

    # ----------------------------------------------------------------- apply
    def apply(self, changes: Sequence[EthernetPortConfig]) -> None:
        """Apply every change to this bridge in one OVSDB transaction; nothing is written on any error."""
        columns: dict[str, PortColumns] = {}
        for cfg in changes:
            if cfg.switch != self.switch:
                raise ValidationError(
                    "switch", cfg.switch, self.switch, f"change for port {cfg.port} of another switch"
                )
            if cfg.port in columns:
                raise ValidationError("port", cfg.port, "each port at most once per batch", "listed twice")
            if cfg.bond:  # an OVS bond's members are its Port's interfaces (ovs-vsctl add-bond, the
                continue  # operator's): a Port the plan would put in a bond is not moved, as no dialect without a template does
            check_port_config(cfg, self.quarantine_vlan)
            columns[cfg.port] = columns_for(cfg, self.quarantine_vlan)
        if not columns:
            return
        api = self._connect()
        comment = f"{COMMENT_PREFIX} {len(columns)} port(s) on {self.switch}"
        try:
            with api.transaction(check_error=True, log_errors=False, nested=False, comment=comment) as txn:
                txn.add(_ApplyPorts(api, self.switch, columns))
            committed = bool(txn.committed)
        except GpufabricError as e:
            if isinstance(e, ApplyError):
                raise
            extra = {k: v for k, v in e.fields.items() if k not in ("fabric", "device")}
            raise ApplyError(e.message, fabric=FABRIC, device=self.switch, **extra) from e
        except Exception as e:
            raise ApplyError(
                f"OVSDB transaction on {self.switch} failed: {e}", fabric=FABRIC, device=self.switch
            ) from e
        if committed:
            self.transactions += 1
            try:
                wait_applied(api, txn.next_cfg, self.timeout)
            except TimeoutError as e:
                raise ApplyError(
                    f"{self.switch}: committed, but ovs-vswitchd did not apply it within {self.timeout}s",
                    fabric=FABRIC, device=self.switch, next_cfg=txn.next_cfg,
                ) from e  # fmt: skip
