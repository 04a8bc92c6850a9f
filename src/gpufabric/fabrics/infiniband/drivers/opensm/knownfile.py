"""The partitions file the OpenSM driver last wrote and verified, kept parsed (pure).

An apply compares the running partitions.conf with the new one: which ports' PKey tables
change (only those are read back by SMP), and whether the last-good copy parses. Both
files are almost always the one the previous apply wrote, so the driver keeps it as a
:class:`KnownFile` - its text, its normalized layout (``parse(render(x))`` is
``normalize_layout(x)``, see :mod:`~gpufabric.fabrics.infiniband.state.partitions`) and each port's expected entries - and a
file whose text is that one is not parsed again. A file changed by anyone else (other
text) is parsed as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpufabric.domain.errors import GpufabricError
from gpufabric.domain.values import Guid
from gpufabric.fabrics.infiniband.state import PartitionLayout
from gpufabric.fabrics.infiniband.state.partitions import (
    changed_entries,
    changed_ports,
    entries_by_port,
    layout_guids,
    parse_partitions_conf,
)


@dataclass(frozen=True)
class KnownFile:
    text: str
    layout: PartitionLayout  # normalized and checked (check_layout's result)
    entries: Mapping[Guid, frozenset[int]]  # entries_by_port(layout)


def safe_parse(text: str | None) -> PartitionLayout | None:
    """``text`` parsed; None when absent or unparsable."""
    if text is None:
        return None
    try:
        return parse_partitions_conf(text)
    except GpufabricError:
        return None


def parse_known(text: str | None, known: KnownFile | None) -> PartitionLayout | None:
    """:func:`safe_parse` of ``text``, the known layout when ``text`` is the known file."""
    if text is not None and known is not None and text == known.text:
        return known.layout
    return safe_parse(text)


def affected_ports(
    old_text: str | None, old: PartitionLayout | None, new: KnownFile, known: KnownFile | None,
    verified: PartitionLayout | None = None,
) -> frozenset[Guid]:
    """Ports whose table goes from ``old`` to ``new`` (what :func:`changed_ports` gives).
    When the file does not change: every port of ``new`` (a re-apply verifies them all), and
    every port whose table differs from the last verified file's layout ``verified`` — a file
    written but never loaded (a worker killed before the reload) names no longer the ports it
    takes out of every partition, and only they still hold the old tables."""
    if old_text == new.text:
        return layout_guids(new.layout) | (changed_ports(verified, new.layout) if verified is not None else frozenset())
    if old is None or old.default_limited_all != new.layout.default_limited_all:
        return changed_ports(old, new.layout)
    before = known.entries if known is not None and old is known.layout else entries_by_port(old)
    return changed_entries(before, new.entries)
