"""Pure parsers of offload state: ``ovs-appctl dpctl/dump-flows -m`` and
``tc -j -s filter show dev <rep> ingress``.

Datapath flows are classified by where they run: ``offloaded:yes`` with ``dp:tc`` is in NIC
hardware (``hw``); ``dp:tc`` alone is tc software (``tc``); ``dp:ovs`` is the kernel or
userspace datapath (``datapath``). ``offloaded:partial`` (DPDK partial offload) stays
``datapath`` with ``partial=True``. OVS prints ``offloaded:`` and ``dp:`` only with ``-m``: a
flow line with neither (a dump without ``-m``, even of ``type=offloaded``) is refused, since it
cannot tell hardware from datapath.

tc filters carry ``in_hw``/``not_in_hw``/``in_hw_count``/``skip_sw``/``skip_hw``. Some iproute2
versions print bare text inside the JSON (u32 ``options``, police actions); the parser repairs
it by keeping each bare run as a ``_bare<N>`` string member and reads flags from it too.

Real outputs (Kube-OVN's documented captures on ConnectX-5, Yusur and Yunsilicon DPDK NICs;
sriov-network-operator's on ConnectX-6 Dx, OVN-Kubernetes vDPA and ovs-cni; the Yunsilicon and
ovs-cni dumps were taken without ``-m`` and are refused) are pinned by
tests/fixtures/real/dpu-flows/ and tests/unit/test_real_outputs.py. No real
``tc -j -s filter show`` capture of a representor was collected yet (not searched for in that
round): the tc parser is pinned only by the recorded and repaired samples of its own tests.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.errors import ValidationError

_UFID: Final = re.compile(r"ufid:([0-9a-f-]+)")
_IN_PORT: Final = re.compile(r"(?:^|[,\s])in_port\(([^)]*)\)")
_COUNTS: Final = re.compile(r"packets:(\d+), bytes:(\d+)")
_OFFLOADED: Final = re.compile(r"offloaded:(yes|no|partial)")
_DP: Final = re.compile(r"\bdp:(\w+)")
_ACTIONS: Final = re.compile(r"actions:(.*)$")
# an output port: a name (``-m``) or an odp port number; representors named after container
# ids start with a digit (Kube-OVN / ovn-kubernetes: ``54235e5753b8_h``), so do bare numbers
_PORT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_NON_PORTS: Final = frozenset(
    {"drop", "userspace", "recirc", "ct", "ct_clear", "clone", "push_vlan", "pop_vlan", "pop_eth", "set", "trunc"}
)
PATHS: Final = ("hw", "tc", "datapath")


@dataclass(frozen=True)
class DpFlow:
    """One datapath flow."""

    ufid: str
    in_port: str
    out_ports: tuple[str, ...]
    packets: int
    bytes: int
    path: str  # hw | tc | datapath
    partial: bool = False


def parse_dump_flows(text: str) -> list[DpFlow]:
    """``ovs-appctl dpctl/dump-flows -m`` (any datapath) -> flows; header lines are skipped."""
    flows: list[DpFlow] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("flow-dump from"):
            continue
        counts, acts = _COUNTS.search(line), _ACTIONS.search(line)
        if counts is None or acts is None:
            raise ValidationError(f"dump-flows line {n}", line[:120], "a flow with 'packets:N, bytes:N' and 'actions:'")
        dp_m, off_m = _DP.search(line[: acts.start()]), _OFFLOADED.search(line[: acts.start()])
        if dp_m is None and off_m is None:  # OVS prints both only with -m (lib/dpctl.c)
            raise ValidationError(
                f"dump-flows line {n}: offloaded/dp",
                "(none)",
                "a dump taken with -m (each flow's dp: attribute)",
                "without -m a line cannot say whether its flow runs in hardware",
            )
        dp = dp_m.group(1) if dp_m else "ovs"
        offloaded = off_m.group(1) if off_m else "no"
        if dp == "tc":
            path = "hw" if offloaded == "yes" else "tc"
        elif dp in ("ovs", "dpdk"):
            path = "datapath"
        else:
            raise ValidationError(f"dump-flows line {n}: dp", dp, "tc, ovs or dpdk")
        ufid = _UFID.search(line)
        inp = _IN_PORT.search(line[: acts.start()])
        outs = tuple(p for p in _top_level(acts.group(1).split(", dp-extra-info")[0]) if p not in _NON_PORTS)
        flows.append(
            DpFlow(
                ufid.group(1) if ufid else f"line{n}",
                inp.group(1) if inp else "",
                outs,
                int(counts.group(1)),
                int(counts.group(2)),
                path,
                offloaded == "partial",
            )
        )
    return flows


def _top_level(actions: str) -> list[str]:
    """Output ports among the comma-separated actions (nested ``tnl_push(...)`` etc. skipped)."""
    out, depth, cur = [], 0, ""
    for ch in actions + ",":
        if ch == "," and depth == 0:
            tok = cur.strip()
            if _PORT_NAME.fullmatch(tok):
                out.append(tok)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    return out


@dataclass(frozen=True)
class TcFilter:
    """One tc filter (flower, u32, ...) with its offload flags and counters."""

    dev: str
    pref: int
    handle: int | None
    kind: str
    chain: int
    skip_sw: bool
    skip_hw: bool
    in_hw: bool
    not_in_hw: bool
    in_hw_count: int
    packets: int
    bytes: int
    repaired: bool = False

    @property
    def silent_drop(self) -> bool:
        """``skip_sw`` and not in hardware: matches nothing anywhere (a rule that does nothing)."""
        return self.skip_sw and not self.in_hw


_BARE_RUN: Final = re.compile(r'[^"{}\[\],]*')


def lenient_json(text: str, limit: int = 500) -> tuple[Any, int]:
    """``json.loads`` that repairs iproute2's bare text (kept as ``_bare<N>`` members) and
    missing commas; returns (value, repairs). Raises ValidationError if it cannot."""
    repairs = 0
    while True:
        try:
            return json.loads(text), repairs
        except json.JSONDecodeError as e:
            if repairs >= limit:
                raise ValidationError("tc -j output", text[max(0, e.pos - 40) : e.pos + 40], "JSON", e.msg) from None
            p = e.pos
            run = _BARE_RUN.match(text, p)
            end = run.end() if run else p
            bare = text[p:end]
            need_comma = e.msg.startswith("Expecting ',' delimiter")
            if not bare.strip():
                if not need_comma:
                    raise ValidationError("tc -j output", text[max(0, p - 40) : p + 40], "JSON", e.msg) from None
                text = text[:p] + "," + text[p:]
            else:
                nxt = text[end:].lstrip()[:1]
                member = f'"_bare{repairs}": {json.dumps(bare.strip())}'
                member = ("," if need_comma else "") + member + ("," if nxt == '"' else "")
                text = text[:p] + member + text[end:]
            repairs += 1


def _flag(opts: dict[str, Any], name: str, bare: str) -> bool:
    return bool(opts.get(name)) or re.search(rf"(?<![a-z_]){name}(?![a-z_])", bare) is not None


def _bare_text(obj: Any) -> str:
    if isinstance(obj, dict):
        return " ".join(str(v) if k.startswith("_bare") else _bare_text(v) for k, v in obj.items())
    if isinstance(obj, list):
        return " ".join(_bare_text(x) for x in obj)
    return ""


def parse_tc_filters(text: str, dev: str) -> list[TcFilter]:
    """``tc -j -s filter show dev <dev> ingress`` -> filters (entries without options skipped)."""
    doc, repairs = lenient_json(text) if text.strip() else ([], 0)
    if not isinstance(doc, list):
        raise ValidationError("tc -j output", str(doc)[:80], "a JSON list of filters")
    out: list[TcFilter] = []
    for f in doc:
        if not isinstance(f, dict) or not isinstance(f.get("options"), dict):
            continue
        opts: dict[str, Any] = f["options"]
        bare = _bare_text(f)
        packets = nbytes = 0
        for a in opts.get("actions") or []:
            st = a.get("stats") if isinstance(a, dict) else None
            if isinstance(st, dict):
                packets, nbytes = max(packets, int(st.get("packets", 0))), max(nbytes, int(st.get("bytes", 0)))
        not_in_hw = _flag(opts, "not_in_hw", bare)
        in_hw = not not_in_hw and _flag(opts, "in_hw", bare)
        out.append(
            TcFilter(
                dev,
                int(f.get("pref", 0)),
                int(opts["handle"]) if isinstance(opts.get("handle"), int) else None,
                str(f.get("kind", "")),
                int(f.get("chain", 0)),
                _flag(opts, "skip_sw", bare),
                _flag(opts, "skip_hw", bare),
                in_hw,
                not_in_hw,
                int(opts.get("in_hw_count", 1 if in_hw else 0)),
                packets,
                nbytes,
                repairs > 0,
            )
        )
    return out
