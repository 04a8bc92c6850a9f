"""What a fabric kind adds to two core commands (issue 19: a fabric is one folder end to end),
through :meth:`~gpufabric.domain.fabric.FabricKind.import_formats` and
:meth:`~gpufabric.domain.fabric.FabricKind.power_cycled`; the core calls them and never names
a kind.

* ``gpufabric inventory import FILE --format NAME``: an :class:`ImportFormat` reads the text of a
  file in a format of the kind's own (a discovery tool's output, say) against the nodes the store
  knows, and gives an :class:`ImportReport`: the nodes to write, and every device the text names,
  matched to a node or skipped with the reason. The core writes the nodes and prints the report.
* ``gpufabric node power-cycled NODE``: an operator power-cycled a node (cold). Every kind that
  reads something of a node only at boot reads it again and answers a :class:`PowerCycled`, or
  refuses (a GpufabricError) while the node still reports a change pending.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.models import Inventory, Node

if TYPE_CHECKING:
    from gpufabric.domain.kind.identity import KindIdentity


@dataclass(frozen=True)
class ImportRequest:
    """One ``inventory import`` in a kind's format.

    ``known`` reads the store's nodes when called (a text refused before it is called leaves the
    store unopened); ``instances`` are the fabric instances of fabrics.yaml (instance -> bound
    kind; empty without a fabrics.yaml) and ``settings`` its top-level mapping; ``instance`` is
    ``--fabric`` (the instance the imported ports are on; None: the format's default) and
    ``strict`` is ``--strict`` (refuse the whole text when one device does not match); ``confirm``
    is ``--confirm`` (the held changes the operator confirms, as the format names them in
    :attr:`ImportReport.pending`)."""

    text: str
    known: Callable[[], Sequence[Node]]
    instances: Mapping[str, KindIdentity] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    instance: str | None = None
    strict: bool = False
    confirm: tuple[str, ...] = ()


def import_instance(name: str | None, instances: Mapping[str, Any], kind: str, label: str) -> str:
    """The instance of ``kind`` a kind format's import writes to (``inventory import --fabric
    NAME``): ``name``, which must be one of ``kind``'s instances in ``instances`` (fabrics.yaml;
    the kind's default instance when it configures none), or, when not given, the only one.
    ValidationError naming ``--fabric`` and the allowed names (``label``: the kind as a person
    names it, e.g. "InfiniBand")."""
    mine = [n for n, k in instances.items() if getattr(k, "name", None) == kind] or [kind]
    if name is None:
        if len(mine) > 1:
            raise ValidationError("--fabric", None, f"one of the {label} instances of fabrics.yaml: {', '.join(mine)}")
        return mine[0]
    if name not in mine:
        raise ValidationError("--fabric", name, f"an {label} instance of fabrics.yaml: {', '.join(mine)}")
    return name


@dataclass(frozen=True)
class ImportEntry:
    """One device the imported text names: matched to ``node`` (``ports`` of its ports
    imported), or skipped: ``skip`` a stable word (e.g. ``switch``), ``reason`` a sentence."""

    label: str  # how a person names it, e.g. "CA 0x0002c90310000100 'gpu-a01 mlx5_0'"
    doc: Mapping[str, Any]  # its JSON form, in the format's own fields
    node: str | None = None
    ports: int = 0
    skip: str = ""
    reason: str = ""

    @property
    def matched(self) -> bool:
        return not self.skip


@dataclass(frozen=True)
class ImportReport:
    """What an :class:`ImportFormat` read.

    ``inventory``: the nodes to write, each with every port it keeps (the ports found, and those
    the store knows that this import does not replace); ``entries``: every device of the text;
    ``held``: node -> why the import puts it in maintenance (never leasable); ``lines``: plain
    text the CLI prints before its ``imported ...`` line (the CLI escapes them); ``fields``: the
    format's own keys of ``--json`` (e.g. a summary and every entry); ``pending``: the changes the
    format holds for an operator's confirmation (not written), each a mapping whose ``confirm``
    is what applies it."""

    inventory: Inventory
    entries: tuple[ImportEntry, ...] = ()
    held: Mapping[str, str] = field(default_factory=dict)
    lines: tuple[str, ...] = ()
    fields: Mapping[str, Any] = field(default_factory=dict)
    pending: tuple[Mapping[str, Any], ...] = ()


class ImportFormat(NamedTuple):
    """An inventory import format a kind adds: ``gpufabric inventory import --format <name>``.

    ``fallback``: the format of a file whose suffix names no format (not .yaml/.yml/.json).
    Registered kinds' formats are listed in ``--help`` when named by a ``gpufabric.import_formats``
    entry point (name -> a callable returning this), which also lets the command load that one
    kind module alone."""

    name: str
    read: Callable[[ImportRequest], ImportReport]
    fallback: bool = False


class PowerCycled(NamedTuple):
    """What a kind read again after a node's cold power cycle: ``line`` (plain text, printed as
    ``node NAME: <line>``) and ``doc`` (the ``--json`` document)."""

    line: str
    doc: Mapping[str, Any]
