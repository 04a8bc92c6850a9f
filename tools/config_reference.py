"""Generate docs/config-reference.md from the validators and signatures themselves.

* ``config.yaml`` ``segments:``: the keys :meth:`SegmentConfig.from_dict` reads (found in its
  source: every ``<mapping>.get("key", default)``), their defaults (``SegmentConfig.default()``
  rendered back) and the allowed range each one's validator states when handed a bad value;
* ``quotas:``: :class:`Quotas` fields, defaults, and the range ``Quotas.from_dict`` refuses;
* ``fabrics.yaml``: the top-level settings (``service.fabrics.TOP_LEVEL``), one section per
  registered fabric kind (entry points) with its own section keys where the kind declares
  them (``SECTION_KEYS``), and every registered driver's options from its ``__init__``
  signature (or from the options dataclass it is built from), with type and default; the
  options ``build`` injects from the top level are marked.

``python tools/config_reference.py`` rewrites the file; ``--check`` exits 1 when it is stale
(tests/unit/test_config_reference.py runs the same comparison)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import textwrap
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpufabric.domain.errors import ValidationError
from gpufabric.domain.quotas import Quotas
from gpufabric.domain.segments import PKeyMapping, SegmentConfig
from gpufabric.engine.fabrics import TOP_LEVEL, Fabrics
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


def segment_keys() -> Iterator[tuple[str, str]]:
    """(dotted key, default source text) of every ``.get`` in SegmentConfig.from_dict and in
    PKeyMapping.from_dict (the ``infiniband`` section's parser, handed its default seg range), in order."""
    seen = _gets(SegmentConfig.from_dict, {"raw": ""}, {})
    seen += _gets(PKeyMapping.from_dict, {"raw": "infiniband."}, {"default_range": "DEFAULT_IB_SEG_RANGE"})
    return iter(sorted(seen))


def _gets(method: Any, prefix: dict[str, str], names: dict[str, str]) -> list[tuple[str, str]]:
    """(dotted key, default) of the ``.get`` calls of ``method`` on the mappings ``prefix`` names
    (variable -> its dotted path); ``names``: a parameter used as a default -> the module constant
    its caller passes."""
    fn = ast.parse(textwrap.dedent(inspect.getsource(method.__func__))).body[0]
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            call = node.value.values[0] if isinstance(node.value, ast.BoolOp) else node.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "get":
                src = call.func.value
                if isinstance(src, ast.Name) and src.id in prefix and isinstance(call.args[1], ast.Dict):
                    key = ast.literal_eval(call.args[0])
                    prefix[node.targets[0].id] = f"{prefix[src.id]}{key}."
    seen: list[tuple[str, str]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            src = node.func.value
            if isinstance(src, ast.Name) and src.id in prefix and len(node.args) == 2:
                key = prefix[src.id] + ast.literal_eval(node.args[0])
                if key + "." not in prefix.values():  # a leaf (a sub-mapping's own keys are listed)
                    default = node.args[1]
                    if isinstance(default, ast.Name) and default.id in names:
                        default = ast.Name(names[default.id])
                    seen.append((key, _default_text(default)))
    return seen


def _default_text(node: ast.expr) -> str:
    """A default as source text; a module constant (``DEFAULT_QUARANTINE_VLAN``) by its value."""
    if isinstance(node, ast.Name):
        return repr(getattr(sys.modules[SegmentConfig.__module__], node.id))
    return ast.unparse(node)


def _allowed(key: str) -> str:
    """What the validator states for a malformed value, then for values out of range."""
    said: list[str] = []
    for bad in (BAD, "0-99999", 99999, 1, {"x": 1}):
        raw = _nested(key, bad)
        if key.startswith("infiniband.mapping.") and key != "infiniband.mapping.mode":
            raw["infiniband"]["mapping"].setdefault("mode", "table" if key.endswith(".table") else "offset")
        a = _probe(SegmentConfig.from_dict, raw)
        if a and a not in said:
            said.append(a)
    return "; ".join(said)


def _segments() -> list[str]:
    rows = ["| key | default | allowed |", "|---|---|---|"]
    for key, default in segment_keys():
        allowed = _allowed(key)
        rows.append(f"| `segments.{key}` | `{default}` | {allowed} |")
    d = SegmentConfig.default()
    rows += ["", f"Defaults as validated: user VLANs {d.user_vlans}, tenant VLANs {d.ethernet_vlans}, quarantine VLAN "
             f"{d.quarantine_vlan}, InfiniBand seg ids {d.ib.seg_range} -> PKeys 0x{d.ib.pkey_range().start:04x}-"
             f"0x{d.ib.pkey_range().end:04x} ({d.ib.mode.value}). Any other key is refused, naming it (NVLink "
             "partitions are not pooled here: each node's come from its baseboard's table)."]  # fmt: skip
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
    options dataclass it builds its configuration from (a ``config`` parameter + ``**options``)."""
    sig = inspect.signature(cls.__init__)
    params = sig.parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()) and "config" in params:
        hints = typing.get_type_hints(cls.__init__)
        conf = next(a for a in typing.get_args(hints["config"]) if dataclasses.is_dataclass(a))
        out = []
        for f in dataclasses.fields(conf):
            if f.default is not dataclasses.MISSING:
                default = f"`{f.default!r}`"
            elif f.default_factory is not dataclasses.MISSING:
                default = f"`{f.default_factory()!r}`"
            else:
                default = "required"
            out.append((f.name, _type(f.type), default))
        return out
    out = []
    for name, p in params.items():
        if name in NOT_CONFIG or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        default = "required" if p.default is p.empty else f"`{p.default!r}`"
        out.append((name, _type(p.annotation), default))
    return out


def _fabrics(reg: Registry) -> list[str]:
    out = ["Top-level settings (besides one section per fabric):", "", "| key | allowed |", "|---|---|"]
    for key in TOP_LEVEL:
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
        *_segments(),
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
