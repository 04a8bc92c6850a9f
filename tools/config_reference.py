"""Generate docs/config-reference.md from the validators and signatures themselves.

* ``config.yaml`` ``segments:``: the keys its parsers read (the core's ``user_vlan_range`` and each
  registered kind's section, ``FabricKind.segment_config``), found by parsing an empty section
  through a mapping that records every ``.get("key", default)``, with that default; the allowed
  range each one's validator states when handed a bad value; and the defaults as validated
  (each kind's ``SegmentSection.describe``);
* ``quotas:``: :class:`Quotas` fields, defaults, and the range ``Quotas.from_dict`` refuses;
* ``fabrics.yaml``: the kinds' top-level settings (``FabricKind.top_level``), one section per
  registered fabric kind (entry points) with its own section keys where the kind declares
  them (``SECTION_KEYS``), and every registered driver's options from its ``__init__``
  signature (or from the options dataclass it is built from), with type and default; the
  options ``build`` injects from the top level are marked.

``python tools/config_reference.py`` rewrites the file; ``--check`` exits 1 when it is stale
(tests/unit/test_config_reference.py runs the same comparison)."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.quotas import Quotas
from gpufabric.domain.segments import SegmentConfig
from gpufabric.engine.fabrics import Fabrics, top_level
from gpufabric.store.registry import Registry

OUT = Path(__file__).resolve().parents[1] / "docs" / "config-reference.md"
BAD = "\x00bad"
# options a kind's build() injects into its drivers (set once, at the top level / config.yaml)
INJECTED = {"quarantine_vlan": "config.yaml segments.ethernet.quarantine_vlan", "pool": "shared OVSDB connections",
            "trusted_sm_guids": "fabrics.yaml trusted_sm_guids"}  # fmt: skip
# constructor parameters that are code seams, not configuration (tests inject them)
NOT_CONFIG = {"self", "sleep", "transport", "restart_hook", "config", "clock", "runner"}


def _probe(build: Callable[[dict[str, Any]], object], raw: dict[str, Any]) -> str:
    """The allowed range a validator states for a bad value (or '' if it takes it)."""
    try:
        build(raw)
    except ValidationError as e:
        return e.allowed
    return ""


def _nested(path: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cur = out
    *parents, leaf = path.split(".")
    for p in parents:
        cur = cur.setdefault(p, {})
    cur[leaf] = value
    return out


class _Reads(dict[str, Any]):
    """An empty mapping that records the keys a parser ``.get``s, with their defaults: a default
    that is None or a mapping stands for a sub-section (its own reads are recorded under
    ``key.``), a sub-section nobody read from is a leaf with that default."""

    def __init__(self, prefix: str = "", default: Any = None) -> None:
        super().__init__()
        self.prefix, self.default = prefix, default
        self.leaves: dict[str, Any] = {}
        self.subs: dict[str, _Reads] = {}

    def __bool__(self) -> bool:
        return True  # ``raw.get("mapping", {}) or {}`` keeps the recorder

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if default is None or isinstance(default, Mapping):
            return self.subs.setdefault(key, _Reads(f"{self.prefix}{key}.", default))
        self.leaves[f"{self.prefix}{key}"] = default
        return default

    def keys_read(self) -> dict[str, Any]:
        out = dict(self.leaves)
        for key, sub in self.subs.items():
            below = sub.keys_read()
            if below:
                out.update(below)
            elif sub.default is not None:
                out[f"{self.prefix}{key}"] = sub.default
        return out


def _kinds(reg: Registry | None = None) -> list[Any]:
    return (reg or Registry.from_entry_points(drivers=False)).ordered_kinds()


def segment_keys(reg: Registry | None = None) -> Iterator[tuple[str, str]]:
    """(dotted key, default as source text) of every key the ``segments:`` parsers read: the
    core's and each registered kind's (``FabricKind.segment_config``), sorted."""
    reads = _Reads()
    SegmentConfig.from_dict(reads, _kinds(reg))
    return iter(sorted((k, repr(v)) for k, v in reads.keys_read().items()))


def _allowed(key: str, kinds: list[Any]) -> str:
    """What the validator states for a malformed value, then for values out of range."""
    said: list[str] = []
    for bad in (BAD, "0-99999", 99999, 1, {"x": 1}):
        raw = _nested(key, bad)
        *parents, leaf = key.split(".")
        if parents and parents[-1] == "mapping" and leaf != "mode":  # a mapping key read in the mode of its name
            _nested_get(raw, parents).setdefault("mode", "table" if leaf == "table" else "offset")
        a = _probe(lambda r: SegmentConfig.from_dict(r, kinds), raw)
        if a and a not in said:
            said.append(a)
    return "; ".join(said)


def _nested_get(raw: dict[str, Any], path: list[str]) -> dict[str, Any]:
    for p in path:
        raw = raw[p]
    return raw


def _segments(reg: Registry | None = None) -> list[str]:
    kinds = _kinds(reg)
    rows = ["| key | default | allowed |", "|---|---|---|"]
    for key, default in segment_keys(reg):
        rows.append(f"| `segments.{key}` | `{default}` | {_allowed(key, kinds)} |")
    d = SegmentConfig.default(kinds)
    said = ", ".join(x for s in d.sections.values() if (x := s.describe()))
    rows += ["", f"Defaults as validated: user VLANs {d.user_vlans}, {said}. Any other key is refused, naming it "
             "(NVLink partitions are not pooled here: each node's come from its baseboard's table)."]  # fmt: skip
    return rows


def _quotas() -> list[str]:
    rows = ["| key | type | default | allowed |", "|---|---|---|---|"]
    for f in dataclasses.fields(Quotas):
        rows.append(f"| `quotas.{f.name}` | {f.type} | `{f.default}` | {_probe(Quotas.from_dict, {f.name: -1})} |")
    return rows


def _type(t: Any) -> str:
    s = t if isinstance(t, str) else getattr(t, "__name__", None) or str(t)
    return str(s).replace("typing.", "").replace("collections.abc.", "").replace("|", "\\|")


def driver_options(cls: type) -> list[tuple[str, str, str]]:
    """(option, type, default) of a driver: its keyword parameters, or the fields of the
    options dataclass it builds its configuration from (a ``config`` parameter + ``**options``)
    followed by its other keyword parameters."""
    sig = inspect.signature(cls.__init__)
    params = sig.parameters
    out: list[tuple[str, str, str]] = []
    if any(p.kind is p.VAR_KEYWORD for p in params.values()) and "config" in params:
        hints = typing.get_type_hints(cls.__init__)
        conf = next(a for a in typing.get_args(hints["config"]) if dataclasses.is_dataclass(a))
        for f in dataclasses.fields(conf):
            if "options" in f.metadata:  # a field read from options of other names (e.g. secrets' _file/_env)
                out.extend((name, typ, "`None`") for name, typ in f.metadata["options"])
                continue
            if f.default is not dataclasses.MISSING:
                default = f"`{f.default!r}`"
            elif f.default_factory is not dataclasses.MISSING:
                default = f"`{f.default_factory()!r}`"
            else:
                default = "required"
            out.append((f.name, _type(f.type), default))
    for name, p in params.items():
        if name in NOT_CONFIG or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        default = "required" if p.default is p.empty else f"`{p.default!r}`"
        out.append((name, _type(p.annotation), default))
    return out


def _fabrics(reg: Registry) -> list[str]:
    out = ["Top-level settings (besides one section per fabric):", "", "| key | allowed |", "|---|---|"]
    for key in sorted(top_level(reg)):
        out.append(f"| `{key}` | {_probe(lambda r: Fabrics.from_config(r, reg), {key: [BAD]})} (a list) |")
    by_kind: dict[str, list[str]] = {}
    for name, cls in reg.drivers.items():
        by_kind.setdefault(cls.__module__.split(".")[2], []).append(name)
    for kind in reg.ordered_kinds():
        mod = sys.modules[type(kind).__module__]
        doc = (mod.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        out += ["", f"### `{kind.name}:`", "", doc]
        keys = getattr(mod, "SECTION_KEYS", None)
        if keys:
            out += ["", f"Section keys: {', '.join(f'`{k}`' for k in sorted(keys))}."]
        for drv in sorted(by_kind.get(kind.name, [])):
            cls = reg.drivers[drv]
            out += ["", f"#### driver `{drv}` ({cls.__module__}.{cls.__name__})", "",
                    "| option | type | default |", "|---|---|---|"]  # fmt: skip
            built = getattr(sys.modules.get(cls.__module__), "SECTION_KEYS", None)
            if built and cls.__module__ != mod.__name__:
                out += [f"Built by the kind from its section keys {', '.join(f'`{k}`' for k in sorted(built))}:", ""]
            for opt, typ, default in driver_options(cls):
                note = f" (injected: {INJECTED[opt]})" if opt in INJECTED else ""
                out.append(f"| `{opt}` | {typ} | {default}{note} |")
    return out


def render(reg: Registry | None = None) -> str:
    reg = reg or Registry.from_entry_points()
    lines = [
        "# Configuration reference",
        "",
        "Generated by `tools/config_reference.py` from the validators and driver signatures (do not edit: run",
        "`python tools/config_reference.py`; a unit test fails when this file is stale). Bad values are refused",
        "with a one-line error naming the key and the allowed range; `gpufabric site check` then checks the",
        "values against the live devices.",
        "",
        "## config.yaml",
        "",
        "### `segments:`",
        "",
        *_segments(reg),
        "",
        "### `quotas:`",
        "",
        *_quotas(),
        "",
        "## fabrics.yaml",
        "",
        *_fabrics(reg),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run python tools/config_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
