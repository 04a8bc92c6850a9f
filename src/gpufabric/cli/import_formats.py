"""The formats of ``gpufabric inventory import``: the core's own (YAML and JSON inventory files)
and those the fabric kinds add (:meth:`FabricKind.import_formats`, :mod:`gpufabric.domain.hooks`).

No kind is named here. ``--help`` and ``--format`` list the formats the
``gpufabric.import_formats`` entry points name (names only: listing them imports no kind); a
format runs from its entry point (one kind module), else from the registered kinds, which also
find a format no entry point names (a kind registered in a test)."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

from gpufabric.domain.errors import ValidationError

if TYPE_CHECKING:
    from gpufabric.domain.hooks import ImportFormat

FILES = ("yaml", "json")
"""The core's formats: inventory files (docs/inventory.md)."""
GROUP = "gpufabric.import_formats"


def _indexed() -> tuple[str, ...]:
    return tuple(sorted({ep.name for ep in entry_points(group=GROUP)} - set(FILES)))


NAMES: tuple[str, ...] = (*FILES, *_indexed())
"""Every format ``--help`` lists, the core's first."""


def listed(names: tuple[str, ...] = NAMES) -> str:
    """``yaml, json or X`` (help text and errors)."""
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]


def parse(value: str) -> str:
    """``--format``'s parser: a listed format or one a registered kind adds (the kinds are loaded
    only for a name no entry point lists); ValueError naming the listed ones otherwise."""
    if value in NAMES or value in kind_formats():
        return value
    raise ValueError(f"{value!r} is not one of {', '.join(map(repr, NAMES))}.")


def kind_formats() -> dict[str, ImportFormat]:
    """Every registered kind's import formats by name (imports the kinds)."""
    from gpufabric.workflow import kind_import

    return kind_import.kind_formats()


def find(name: str) -> ImportFormat:
    """The kind format ``name``: through its entry point when one names it, else the kinds'."""
    for ep in entry_points(group=GROUP, name=name):
        f: ImportFormat = ep.load()()
        if f.name == name:
            return f
    found = kind_formats().get(name)
    if found is None:
        raise ValidationError("format", name, listed())
    return found


def resolve(path: Path, name: str | None) -> tuple[str, ImportFormat | None]:
    """The format ``--format`` names, else ``path``'s by its suffix (.yaml/.yml, .json, else the
    listed kind format that reads files of any other suffix: ``ImportFormat.fallback``), and the
    kind's format (None: an inventory file)."""
    if name is None:
        suffix = path.suffix.lower()
        name = "yaml" if suffix in (".yaml", ".yml") else "json" if suffix == ".json" else None
    if name in FILES:
        return name, None
    if name is not None:
        return name, find(name)
    for listed_name in NAMES[len(FILES) :]:
        if (f := find(listed_name)).fallback:
            return listed_name, f
    raise ValidationError("--format", None, f"{listed()} (the suffix of {path.name} names no format)")
