"""OpenSM subnet-manager driver: partitions.conf + one HUP per batch, verified by SMP reads.

``apply(layout)``: render (refusing at plan time what OpenSM would misread or what exceeds
a port's PKey table), check that every named port is on the fabric, write the file
atomically (temp + fsync + rename), send ONE reload (SIGHUP by pid file, ``systemctl kill
-s HUP``, or a command), wait for the next ``SUBNET UP`` in the OpenSM log, then read every
affected port's PKey table with SMPs (``smpquery pkeys`` - the ports' real tables, not
OpenSM's view) until each equals what the layout implies. A PARSE ERROR (OpenSM fails
open: every port full member of 0xffff), an ``ERR 05xx`` line (e.g. table full, keys
silently skipped) or a mismatch at the deadline restores ``partitions.conf.last-good``,
reloads, verifies that, and raises :class:`ApplyError` / :class:`VerifyError`.

``observe()``: the CA ports from ibnetdiscover (cached; rediscovered after TOPOLOGY_TTL, when a
cached port cannot be read, or when apply misses a GUID), then PKey table + PortInfo of each port,
SMInfo of every port whose CapabilityMask has IsSM and of the master the ports point at.

SMP reads (observe and apply's verification) go through ``reader``: ``"batch"`` (default,
one long-lived ``smpbatch`` process per driver sending every SMP of a read through one
libibmad port; :meth:`OpenSMDriver.close` stops it) or ``"smpquery"`` (one infiniband-diags
process per query, ``workers`` at a time).

IPoIB (:mod:`~gpufabric.fabrics.infiniband.state.ipoib`): tenant partitions are rendered with ``ipoib`` (and the ``ipoib``
option's mtu/rate/sl/scope); before writing, the number of IPoIB partitions is checked
against the switches' MulticastFDBCap (``smpquery switchinfo`` of every switch, once; or
the ``mcast_fdb_cap`` option); with ``sa_dump`` (OpenSM's ``opensm-sa.dump``, written with
``sa_db_dump TRUE``) the verification also waits until the SA database holds the broadcast
group of every IPoIB partition and none of a removed one.

M_Key: ``m_key_file`` (a 0600 secret file holding the fabric's M_Key, ``0x...``) makes every
SMP this driver sends carry it, handed to the tools over their stdin pipe, never on a command
line (:mod:`.diag`: ``-z /dev/stdin``; :mod:`.smpbatch`: ``--m-key-stdin``).

SM hosts (:mod:`.hosts`, :mod:`.fleet`): the files above live on one host (the local
SM by default) or on every SM host of ``sm_hosts`` over SSH. Each apply finds the master by
SMInfo, writes the standbys first and the master last (each sha256 read back and compared; a
host that cannot be written fails the apply, naming it, with the others given back their old
file), reloads only the master, follows the master's log and reads the IPoIB groups back from
the master's ``sa_dump`` over SSH. ``observe`` reads every host's sha256 into ``sm_files``.
Which SM is master, and the wait for SUBNET UP: :mod:`.control`; SMP verification: :mod:`.verify`.

Tested for real against OpenSM 3.3.23 on ibsim (tests/fabrics/infiniband/functional/test_ib_opensm.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import ApplyError, ConfigError, FabricError, GpufabricError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.audit.hardening import parse_opensm_conf, unreadable_settings
from gpufabric.fabrics.infiniband.audit.keys import KEY_DIFFERS, differing
from gpufabric.fabrics.infiniband.audit.places import Places
from gpufabric.fabrics.infiniband.audit.rogue import RoguePolicy, RogueReport
from gpufabric.fabrics.infiniband.drivers.base import CAPABILITIES, SubnetManagerDriver
from gpufabric.fabrics.infiniband.drivers.opensm.checks import (
    conf_keys,
    conf_mode_ok,
    load_m_key,
    read_mcast_fdb_cap,
    wait_for_groups,
)
from gpufabric.fabrics.infiniband.drivers.opensm.config import OpenSMConfig
from gpufabric.fabrics.infiniband.drivers.opensm.contain import contain_rogue_sms
from gpufabric.fabrics.infiniband.drivers.opensm.control import ApplyReport, choose_master, sm_states, wait_subnet_up
from gpufabric.fabrics.infiniband.drivers.opensm.diag import Diag
from gpufabric.fabrics.infiniband.drivers.opensm.fleet import SmFleet, lock_path, sm_hosts
from gpufabric.fabrics.infiniband.drivers.opensm.hosts import SmHost, SshSmHost, run_cmd
from gpufabric.fabrics.infiniband.drivers.opensm.knownfile import KnownFile, affected_ports, parse_known
from gpufabric.fabrics.infiniband.drivers.opensm.observe import observe_fabric
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import SmpReader, keep_warm, make_reader, read_pkeys
from gpufabric.fabrics.infiniband.drivers.opensm.verify import mismatches, wait_verified
from gpufabric.fabrics.infiniband.drivers.opensm.watch import SmWatch
from gpufabric.fabrics.infiniband.readers.diags import OpenSMLogScan
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import CaPort, ca_ports
from gpufabric.fabrics.infiniband.state import IbFabricState, PartitionLayout, PkeyTable
from gpufabric.fabrics.infiniband.state.ipoib import check_mcast_budget, group_qos
from gpufabric.fabrics.infiniband.state.partitions import (
    check_layout,
    entries_by_port,
    layout_guids,
    parse_partitions_conf,
    render_checked,
    render_partitions_conf,
)
from gpufabric.transport.secrets import TransportNote, loose_note

FABRIC = "infiniband"
SAFE_LAYOUT = PartitionLayout()  # hosts limited in the default partition, nothing else
TOPOLOGY_TTL = 30.0  # seconds an ibnetdiscover topology serves observe() before new devices are looked for


class OpenSMDriver(SubnetManagerDriver):
    """Drive one OpenSM through its partitions.conf (see module docstring)."""

    capabilities = CAPABILITIES  # every optional power of the contract: SMInfo, discovery, config, watch, contain

    def __init__(
        self, config: OpenSMConfig | None = None, *, restart_hook: Callable[[], None] | None = None, **options: Any
    ) -> None:
        self.config = config if config is not None else OpenSMConfig.from_options(options)
        c = self.config
        self.diag = Diag(dict(c.diag_env), c.diag_prefix, c.diag_cwd, workers=c.workers, m_key=load_m_key(c.m_key_file))
        self.reader: SmpReader = make_reader(c.reader, self.diag, c.reader_command, c.reader_idle)
        self.restart_hook = restart_hook
        self.last_report = ApplyReport()
        self._ports: dict[Guid, CaPort] = {}
        self._ports_at = 0.0  # monotonic time of the last ibnetdiscover
        self._capacity: dict[Guid, int] = {}
        self._switch_lids: tuple[int, ...] = ()
        self._mcast_cap = c.mcast_fdb_cap
        self._read_back: dict[Guid, PkeyTable] = {}
        self._lock = threading.Lock()
        self.fleet = SmFleet(sm_hosts(c))
        self._written: str | None = None  # what this driver last wrote and verified
        self._checked: tuple[PartitionLayout, PartitionLayout] | None = None  # render's (layout, check_layout)
        self._good: KnownFile | None = None  # ... kept parsed: the next apply's "old" (:mod:`.knownfile`)
        self._loose_conf: Path | None = None  # an opensm_conf with keys others may read (insecure: true)
        if c.opensm_conf is not None and not c.sm_hosts:  # a local one is checked now: ConfigError at load
            try:
                text = self.fleet.hosts[0].read(c.opensm_conf)
            except (OSError, UnicodeDecodeError):
                text = None  # unreadable: observe's settings() says so
            if text is not None:
                self._conf_mode_ok(self.fleet.hosts[0], c.opensm_conf, parse_opensm_conf(text))

    def master(self) -> SmHost:
        """The SM host SMInfo names master (by its ``port_guid``). When the master SMInfo names is
        none of them (a rogue took the subnet), the SMInfo of each SM host's own port decides
        (:func:`~gpufabric.fabrics.infiniband.drivers.opensm.control.choose_master`); the first host listed only when no SM answers."""
        hosts = self.fleet.hosts
        if len(hosts) == 1 or not any(h.port_guid for h in hosts):
            return hosts[0]
        try:
            guid: Guid | None = self.diag.sminfo().guid
        except GpufabricError:
            guid = None
        named = [h for h in hosts if guid is not None and h.port_guid == guid]
        if named:
            return named[0]
        try:
            ports = self.ports()
        except GpufabricError:
            return hosts[0]
        return choose_master(hosts, sm_states(self.diag, hosts, ports)) or hosts[0]

    # -- plan ---------------------------------------------------------------------------
    def render(self, layout: PartitionLayout) -> str:
        """The partitions.conf text for ``layout`` (raises CapacityError/ValidationError)."""
        c = self.config
        norm = check_layout(layout, c.trusted_sm_guids, self._capacity, c.default_capacity)
        self._checked = (layout, norm)  # apply's check of the same layout, not done twice
        return render_checked(norm, ipoib=c.ipoib)

    def ports(self, refresh: bool = False) -> dict[Guid, CaPort]:
        """CA ports on the fabric (ibnetdiscover), cached until ``refresh`` or a GUID is missing."""
        if refresh or not self._ports:
            topo = self.diag.discover()
            self._ports = ca_ports(topo)
            self._switch_lids = tuple(sorted({n.lid for n in topo.switches() if n.lid}))
            self._ports_at = time.monotonic()
        return self._ports

    def mcast_fdb_cap(self) -> int:
        """The smallest MulticastFDBCap of the subnet's switches (``smpquery switchinfo``,
        read once; the ``mcast_fdb_cap`` option skips the reads). 0 when no switch answered."""
        if not self._mcast_cap:
            self.ports()
            self._mcast_cap = read_mcast_fdb_cap(self.diag, self._switch_lids)
        return self._mcast_cap

    def check_ipoib_budget(self, layout: PartitionLayout) -> None:
        """CapacityError when ``layout``'s IPoIB partitions need more multicast LIDs than the switches hold."""
        n = sum(1 for p in layout.partitions if p.ipoib) if self.config.ipoib.enabled else 0
        if n:
            check_mcast_budget(n, self.mcast_fdb_cap())

    def _with_topology(self, read: Callable[[dict[Guid, CaPort]], IbFabricState]) -> IbFabricState:
        """``read`` over the cached topology: rediscovered when older than TOPOLOGY_TTL (new
        devices) or when a cached port cannot be read (moved LID, gone device)."""
        stale = time.monotonic() - self._ports_at > TOPOLOGY_TTL
        try:
            return read(self.ports(refresh=stale))
        except FabricError:
            if stale:
                raise
            return read(self.ports(refresh=True))

    # -- apply --------------------------------------------------------------------------
    def apply(self, layout: PartitionLayout) -> tuple[PkeyTable, ...]:
        """Apply ``layout``; returns the SMP read-back of every port whose table it changed."""
        with self._lock, self._file_lock():
            self._read_back = {}
            self._apply(layout)
            return tuple(self._read_back[g] for g in sorted(self._read_back))

    def _apply(self, layout: PartitionLayout) -> None:
        c = self.config
        t0 = time.monotonic()
        text = self.render(layout)
        done, self._checked = self._checked, None
        new = done[1] if done is not None and done[0] is layout else check_layout(
            layout, c.trusted_sm_guids, self._capacity, c.default_capacity
        )  # fmt: skip
        self.check_ipoib_budget(new)
        master = self.master()
        old_text = master.read(master.partitions_conf)
        old = parse_known(old_text, self._good)
        expected = entries_by_port(new)
        last = master.read(master.last_good)
        verified = parse_known(last, self._good) if old_text == text and last != text else None
        affected = affected_ports(old_text, old, KnownFile(text, new, expected), self._good, verified)
        ports = self._locate(affected, required=layout_guids(new))
        report = ApplyReport(changed=old_text != text, ports_checked=len(ports))
        self.last_report = report
        good_state = KnownFile(text, new, expected)
        if not report.changed and not self._mismatches(new, ports, expected) and self._standbys_hold(master, text):
            self._mark_good(master, text, last, good_state)
            report.total_seconds = time.monotonic() - t0
            return
        if last is not None and parse_known(last, self._good) is not None:
            good = last
        else:  # bootstrap: the running file if it parses, else the safe default (fail closed)
            good = old_text if old_text is not None and old is not None else self._safe_text()
            self.fleet.write_all(master, good, last_good=True)
        self.fleet.write_all(master, text, restore=old_text)  # standbys first; fails naming the host
        try:
            report.log = self._reload_and_wait(master, report)
            t1 = time.monotonic()
            if not report.log.ok:
                raise ApplyError(
                    f"OpenSM rejected partitions.conf: {report.log.problems()[0]}",
                    fabric=FABRIC,
                    device=f"{master.name}:{master.partitions_conf}",
                    problems=list(report.log.problems()[:20]),
                )
            self.verify(new, ports, expected)
            self.verify_groups(new, master)
            report.verify_seconds = time.monotonic() - t1
        except GpufabricError as e:
            self._rollback(master, good, ports, e)
            raise
        self._mark_good(master, text, good, good_state)
        report.total_seconds = time.monotonic() - t0

    def _standbys_hold(self, master: SmHost, text: str) -> bool:
        """Every other SM host's file is ``text`` (a standby edited by hand is rewritten)."""
        want = hashlib.sha256(text.encode()).hexdigest()
        return all(h.checksum(h.partitions_conf) == want for h in self.fleet.hosts if h is not master)

    def write_partitions(self, layout: PartitionLayout) -> None:
        """Write ``layout`` as partitions.conf (atomically) without reloading the SM: what a
        restart should come up with (the rogue-SM containment restarts the SM)."""
        with self._lock, self._file_lock():
            self.fleet.write_all(self.master(), self.render(layout))

    def _safe_text(self) -> str:
        return render_partitions_conf(SAFE_LAYOUT, self.config.trusted_sm_guids)

    def _locate(self, guids: frozenset[Guid], required: frozenset[Guid]) -> list[CaPort]:
        ports = self.ports()
        if not guids <= ports.keys():
            ports = self.ports(refresh=True)
        missing = sorted(required - ports.keys())
        if missing and self.config.require_present:
            raise FabricError(
                f"{len(missing)} port GUID(s) of the layout are not on the fabric (OpenSM would ignore them): "
                + ", ".join(str(g) for g in missing[:5]),
                fabric=FABRIC,
                missing=[str(g) for g in missing],
            )
        return [ports[g] for g in sorted(guids) if g in ports]

    def _reload_and_wait(self, master: SmHost, report: ApplyReport) -> OpenSMLogScan:
        offset = master.size(master.log_file)
        t = time.monotonic()
        master.reload()
        report.reloads += 1
        scan = self._wait_subnet_up(master, offset)
        report.sweep_seconds += time.monotonic() - t
        return scan

    def _wait_subnet_up(self, host: SmHost, offset: int) -> OpenSMLogScan:
        return wait_subnet_up(host, offset, self.config.sweep_timeout, lambda: keep_warm(self.reader))

    def _mismatches(
        self, layout: PartitionLayout, ports: Sequence[CaPort], expected: Mapping[Guid, frozenset[int]] | None = None
    ) -> dict[str, str]:
        """Ports whose real table differs from ``layout`` (``expected``: its entries_by_port,
        when the caller has them): {guid: "have [...] want [...]"} (:mod:`~gpufabric.fabrics.infiniband.drivers.opensm.verify`)."""
        bad, tables = mismatches(self.reader, layout, ports, entries_by_port(layout) if expected is None else expected)
        for g, t in tables.items():
            self._capacity[g] = t.capacity
            self._read_back[g] = t
        return bad

    def verify(
        self, layout: PartitionLayout, ports: Sequence[CaPort], expected: Mapping[Guid, frozenset[int]] | None = None
    ) -> None:
        want = entries_by_port(layout) if expected is None else expected  # once, not per poll
        wait_verified(lambda todo: self._mismatches(layout, todo, want), ports, self.config.verify_timeout)

    def verify_groups(self, layout: PartitionLayout, master: SmHost | None = None) -> None:
        """With ``sa_dump``: wait until OpenSM's SA database holds the IPoIB broadcast group of
        every IPoIB partition of ``layout`` and none of a tenant partition it no longer has.
        With ``sm_hosts``: the master's ``sa_dump`` (SMInfo's master unless given), read over SSH."""
        c = self.config
        if not c.ipoib.enabled:
            return
        pkeys = [p.pkey.value for p in layout.partitions if p.ipoib]
        wanted = group_qos(c.ipoib, layout)
        if not c.sm_hosts:
            if c.sa_dump is not None:
                wait_for_groups(c.sa_dump, pkeys, c.verify_timeout, wanted=wanted)
            return
        host = master if master is not None else self.master()
        path = host.sa_dump or c.sa_dump  # the driver's sa_dump: a path on the master SM host
        if path is not None:
            wait_for_groups(path, pkeys, c.verify_timeout, read=host.read, host=host.name, wanted=wanted)

    def _rollback(self, master: SmHost, good: str, ports: Sequence[CaPort], cause: GpufabricError) -> None:
        rollback_ok = False
        try:
            self.fleet.write_all(master, good)
            scan = self._reload_and_wait(master, self.last_report)
            layout = parse_partitions_conf(good)
            if scan.ok:
                self.verify(layout, ports)
                rollback_ok = True
        except GpufabricError as e:
            cause.fields["rollback_error"] = e.message
        cause.fields["rolled_back"] = True
        cause.fields["rollback_verified"] = rollback_ok

    def _mark_good(
        self, master: SmHost, text: str, last_good: str | None,
        state: KnownFile | None = None,
    ) -> None:  # fmt: skip
        if last_good != text:
            self.fleet.write_all(master, text, last_good=True)
        self._written = text
        self._good = state

    @contextmanager
    def _file_lock(self) -> Iterator[None]:
        lock = lock_path(self.config)
        lock.parent.mkdir(parents=True, exist_ok=True)
        with lock.open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    # -- reaching the SM ----------------------------------------------------------------
    def reload(self) -> None:
        """Make the master OpenSM re-read partitions.conf and sweep (SIGHUP / systemctl)."""
        self.master().reload()

    def restart(self) -> None:
        """Restart the trusted OpenSM and wait for its SUBNET UP (the only way it takes
        mastership back from an SM that holds a different sm_key)."""
        c = self.config
        master = self.master()
        offset = master.size(master.log_file)
        if self.restart_hook is not None:
            self.restart_hook()
        elif isinstance(master, SshSmHost):
            master.restart()
        elif c.systemd_unit:
            run_cmd(["systemctl", "restart", c.systemd_unit])
        elif c.restart_command:
            run_cmd(list(c.restart_command))
        else:
            raise ConfigError("infiniband.options", "restart", "restart_hook, systemd_unit or restart_command")
        self._wait_subnet_up(master, offset)

    # -- observe ------------------------------------------------------------------------
    def observe(self) -> IbFabricState:
        state = self._with_topology(lambda ports: observe_fabric(self.reader, ports))
        files = self.fleet.files_seen(state.master_guid, self._written)
        return replace(state, settings=self.settings(), sm_files=files)

    def settings(self) -> tuple[tuple[str, str], ...]:
        """The trusted SM's opensm.conf as (key, value) pairs, for the hardening audit; a
        marker of why not (:func:`unreadable_settings`) when it is not configured or unreadable.
        With ``sm_hosts`` the path is on the master SM host (read over SSH)."""
        conf = self.config.opensm_conf
        if conf is None:
            return unreadable_settings("no opensm_conf in the driver's options")
        host = self.fleet.hosts[0] if not self.config.sm_hosts else None
        try:
            host = host or self.master()
            text = host.read(conf)
            if text is None:
                return unreadable_settings(f"{host.name}:{conf}: no such file" if self.config.sm_hosts else f"{conf}: no such file")
            parsed = parse_opensm_conf(text)
            self._conf_mode_ok(host, conf, parsed)
        except (OSError, UnicodeDecodeError) as e:
            return unreadable_settings(f"{conf}: {getattr(e, 'strerror', None) or e}")
        except GpufabricError as e:
            return unreadable_settings(e.message)
        given = dict(self.config.keys) | ({"m_key": self.diag.m_key} if self.diag.m_key is not None else {})
        if differ := differing(given, parsed):
            parsed[KEY_DIFFERS] = ",".join(differ)
        return tuple(sorted(parsed.items()))

    def _conf_mode_ok(self, host: SmHost, conf: Path, parsed: dict[str, str]) -> None:
        """opensm_conf holding keys must be owner-only (:func:`~gpufabric.fabrics.infiniband.drivers.opensm.checks.conf_mode_ok`), or with ``insecure``
        remembered for :meth:`transport_notes`; one without a key is not stat'ed (one SSH round trip less)."""
        where = conf if not self.config.sm_hosts else Path(f"{host.name}:{conf}")
        mode = host.mode(conf) if conf_keys(parsed) else None
        ok = conf_mode_ok(where, parsed, mode, self.config.insecure)
        self._loose_conf = None if ok else where

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """An opensm_conf holding keys that group or others may read, accepted with
        ``insecure: true`` (audit ``TRANSPORT-INSECURE``)."""
        return (loose_note("opensm", "opensm_conf (sm_key/m_key)", self._loose_conf),) if self._loose_conf else ()

    def watcher(self, trusted: Sequence[Guid]) -> SmWatch:
        return SmWatch(self, trusted, applying=self._lock.locked)  # held while it writes the SM's partitions

    def contain_rogue(self, layout: PartitionLayout, policy: RoguePolicy, places: Places | None) -> RogueReport:
        return contain_rogue_sms(self, layout, policy, places)

    def close(self) -> None:
        """Stop the batch reader's process (a later read starts a new one); close SSH connections."""
        self.reader.close()
        self.fleet.close()

    def tables(self, guids: Sequence[Guid]) -> list[PkeyTable]:
        """PKey tables of the given ports, read by SMP now."""
        ports = self.ports()
        sel = [ports[g] for g in guids if g in ports]
        reads = read_pkeys(self.reader, sel)
        out = []
        for p, r in zip(sel, reads, strict=True):
            if isinstance(r, GpufabricError):
                raise r
            out.append(PkeyTable(p.guid, r.entries, r.capacity, p.lid))
        return out
