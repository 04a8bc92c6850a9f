"""Every SM of a subnet gets the same partitions file: the write order, the checksums, the audit read.

:class:`SmFleet` holds the subnet's SM hosts (:mod:`~gpufabric.fabrics.infiniband.drivers.opensm.hosts`). ``master`` is the host whose
``port_guid`` SMInfo names as master (the caller passes that GUID); with none matching, the
first host listed. :meth:`SmFleet.write_all` writes the standbys first and the master last, so a
standby that takes over in the middle never finds an old file; on each host the sha256 the host
reads back after the rename must equal that of the text sent, else an ApplyError naming the host.
When one host cannot be written, the hosts already written are given back the file the master
ran with (nothing is half-claimed: no SM was reloaded, and none would take over with the new
file) and the ApplyError names the host that failed and the ones restored.

:meth:`SmFleet.files_seen` is the audit's read: each host's sha256 against what gpufabric last
wrote and verified (:class:`~gpufabric.domain.state.SmFileSeen`). :func:`sm_hosts` builds the
hosts of a driver configuration; :func:`lock_path` is its local apply lock.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gpufabric.domain.errors import ApplyError, GpufabricError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.drivers.opensm.config import OpenSMConfig
from gpufabric.fabrics.infiniband.drivers.opensm.hosts import LocalSmHost, SmHost, SshSmHost, sha256
from gpufabric.fabrics.infiniband.state import SmFileSeen

FABRIC = "infiniband"


class SmFleet:
    def __init__(self, hosts: Sequence[SmHost]) -> None:
        if not hosts:
            raise ValueError("an SM fleet needs one host at least")
        self.hosts = tuple(hosts)

    def master(self, master_guid: Guid | None) -> SmHost:
        """The host SMInfo names master (by ``port_guid``), else the first one listed."""
        for h in self.hosts:
            if master_guid is not None and h.port_guid == master_guid:
                return h
        return self.hosts[0]

    def ordered(self, master: SmHost) -> list[SmHost]:
        """Standbys (in configuration order), then the master."""
        return [h for h in self.hosts if h is not master] + [master]

    def write_all(self, master: SmHost, text: str, *, last_good: bool = False, restore: str | None = None) -> None:
        """``text`` to every host's partitions file (or its last-good copy), standbys first.
        When a host fails, the hosts already written (and the one that failed, if its file
        changed) are given ``restore`` back (the file the master ran with), when there is one."""
        want = sha256(text)
        done: list[SmHost] = []
        for h in self.ordered(master):
            path = h.last_good if last_good else h.partitions_conf
            try:
                got = h.write(path, text)
                if got != want:
                    raise ApplyError(
                        f"SM host {h.name}: {path} reads back sha256 {got[:16] or '(none)'}..., "
                        f"not {want[:16]}... of what was written",
                        fabric=FABRIC, device=h.name, sm_host=h.name, path=str(path),
                        sha256_written=want, sha256_read=got,
                    )  # fmt: skip
            except GpufabricError as e:
                if not last_good:
                    e.fields["sm_hosts_written"] = [x.name for x in done]
                    e.fields["sm_hosts_restored"] = self._restore([*done, h], restore)
                e.fields.setdefault("sm_host", h.name)
                raise
            done.append(h)

    @staticmethod
    def _restore(hosts: list[SmHost], text: str | None) -> list[str]:
        """Give ``text`` back to the hosts whose file is not it; best effort, returns their names."""
        out: list[str] = []
        if text is None:
            return out
        for h in hosts:
            try:
                if h.checksum(h.partitions_conf) != sha256(text):
                    h.write(h.partitions_conf, text)
                    out.append(h.name)
            except GpufabricError:
                continue
        return out

    def files_seen(self, master_guid: Guid | None, expected_text: str | None) -> tuple[SmFileSeen, ...]:
        """Each host's partitions file (sha256) against ``expected_text`` (what gpufabric last
        wrote and verified; None: read from the master's last-good copy)."""
        master = self.master(master_guid)
        expected = sha256(expected_text) if expected_text is not None else None
        if expected is None:
            try:
                expected = master.checksum(master.last_good)
            except GpufabricError:
                expected = None
        out = []
        for h in self.hosts:
            role = "master" if h is master else "standby"
            try:
                got = h.checksum(h.partitions_conf)
                err = "" if got is not None else f"{h.partitions_conf}: no such file"
            except GpufabricError as e:
                got, err = None, e.message
            out.append(SmFileSeen(h.name, role, got or "", expected or "", err))
        return tuple(out)

    def close(self) -> None:
        for h in self.hosts:
            h.close()


def sm_hosts(c: OpenSMConfig) -> list[SmHost]:
    """The SM hosts of ``c``: one per ``sm_hosts`` entry (SSH), else the local SM."""
    if c.sm_hosts:
        return [SshSmHost(h) for h in c.sm_hosts]
    assert c.partitions_conf is not None and c.log_path is not None  # checked by from_options
    return [
        LocalSmHost(c.partitions_conf, c.log_path, pid_file=c.pid_file, systemd_unit=c.systemd_unit,
                    reload_command=c.reload_command)
    ]  # fmt: skip


def lock_path(c: OpenSMConfig) -> Path:
    """The local lock serialising applies: ``lock_file``, next to a local partitions_conf, or
    one per set of SM hosts in the temp directory."""
    if c.lock_file is not None:
        return c.lock_file
    if c.partitions_conf is not None and not c.sm_hosts:
        return c.partitions_conf.with_name(c.partitions_conf.name + ".lock")
    names = ",".join(f"{h.host}:{h.port}:{h.partitions_conf}" for h in c.sm_hosts)
    return Path(tempfile.gettempdir()) / f"gpufabric-opensm-{hashlib.sha256(names.encode()).hexdigest()[:12]}.lock"
