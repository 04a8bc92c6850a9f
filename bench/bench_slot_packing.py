"""The slot allocator's packing on a simulated fleet of 8-GPU HGX hosts under random slot churn
(issue 33), against a first-fit baseline fed the same request stream in the same run.

**Fleet**: ``HOSTS`` hosts (1,000), each the HGX 8-GPU board of ``fabrics/nvlink/segments.py``
(Fabric Manager's shared-NVSwitch table: 1x8, 2x4, 4x2, 8x1; a slot is exactly one partition).
A host's state is the set of its busy GPUs (an 8-bit mask); both policies' in-host choices are
tabulated once for all 256 masks (the real ``plan.allocate`` for gpufabric).

**Stream** (one per seed, replayed unchanged to every policy): Poisson arrivals of slot requests
of 1, 2, 4 or 8 GPUs in the ``MIX`` proportions (our choice, by count: 20 % 1-GPU, 35 % 2-GPU, the "2 GPUs
x 4" VMs of seed 001, 25 % 4-GPU, 20 % whole-box 8-GPU VMs; mean 3.5 GPUs), each living an
exponential time (mean 1, any size); the arrival rate offers ``LOADS`` x the fleet's GPUs (0.90,
0.95, 1.00: utilisations of ~90, ~95, ~97 %). A request nothing fits is refused and gone (no
queue, no retry). The first ``WARM`` mean lifetimes fill the fleet and are not counted;
``MEASURE`` lifetimes are (~34,000 requests per seed at 1,000 hosts).

**Policies**:
- ``first_fit``: the lowest-id host with a free partition of ``k`` GPUs; in it the lowest-id
  free partition of that size (no packing).
- ``gpufabric``: the host where placing ``k`` breaks the fewest free *larger* partitions
  (per size, largest first: the loss of ``plan.keep_free_score``), then the one left with the
  fewest free GPUs (best fit), then the lowest id; in it ``plan.allocate``'s partition.
- ``first_fit_host_allocate`` (the in-host part alone): first-fit's host, ``plan.allocate``'s
  partition.
- ``best_fit_host_first_partition`` (the host part alone): the host with the fewest free GPUs
  that has a free partition of ``k`` (lowest id on ties), in it the lowest-id partition.

**Metrics** over the measured window, per policy and seed: ``refused[k]`` (refused / requested
k-GPU requests); ``refused_8_fleet_free`` = 8-GPU requests refused while the fleet held >= 8 free
GPUs in total, over all 8-GPU requests (fragmentation refusals: the table is a buddy system, so
repacking the live slots would always free a whole host then); ``refused_shape[k]`` = k-GPU
requests refused while some single host had >= k free GPUs (refused for partition shape only;
0 by construction for k = 1 and 8: a host with 8 free GPUs has its 8-partition free, so the
issue's "refused while 8 free GPUs exist on one host" is ``refused_shape[8]``, always 0);
``utilisation`` (busy GPUs / all GPUs, seen by the arrivals: time-average by PASTA). Summary per
load: medians over seeds, the pooled fraction (counts of all seeds summed) and the ratios policy /
first-fit (pooled, and the median of the per-seed ratios). Fleet
accounting (busy GPUs per host = union of its live slots, free + busy = all GPUs) is checked at
the end of every run, and at every event with ``check=True`` (the unit test).

Run: ``.venv/bin/python -m bench.bench_slot_packing`` (writes bench/results/slot_packing.json).
"""

from __future__ import annotations

import heapq
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufabric.fabrics.nvlink.plan import allocate, free_partitions, keep_free_score
from gpufabric.fabrics.nvlink.segments import DEFAULT_BOARD, Partition, table

RESULTS = Path(__file__).parent / "results" / "slot_packing.json"
HOSTS = 1000
SEEDS = (1, 2, 3, 4, 5, 6, 7)
MIX: dict[int, float] = {1: 0.20, 2: 0.35, 4: 0.25, 8: 0.20}
LOADS = (0.90, 0.95, 1.00)  # offered GPU-time / fleet GPU-time, one block of results each
OFFERED = 1.0  # the default of one stream
WARM = 5.0  # mean lifetimes not counted (the fleet fills: 1 - e^-5 = 99.3 % of its steady state)
MEASURE = 10.0  # mean lifetimes counted
GPUS = 8
BASELINE = "first_fit"
POLICIES = ("first_fit", "gpufabric", "first_fit_host_allocate", "best_fit_host_first_partition")
PARTS: tuple[Partition, ...] = table(DEFAULT_BOARD)
SIZES = tuple(sorted(MIX))


def mask(gpus: frozenset[int]) -> int:
    return sum(1 << (g - 1) for g in gpus)


def busy_of(state: int) -> frozenset[int]:
    return frozenset(g + 1 for g in range(GPUS) if state >> g & 1)


@dataclass(frozen=True)
class Request:
    t: float
    k: int
    life: float


def stream(seed: int, hosts: int, mix: dict[int, float] = MIX, offered: float = OFFERED,
           warm: float = WARM, measure: float = MEASURE) -> tuple[Request, ...]:  # fmt: skip
    """The seeded request stream: Poisson arrivals offering ``offered`` x the fleet's GPUs."""
    rng = random.Random(seed)
    sizes, weights = list(mix), list(mix.values())
    mean_k = sum(k * w for k, w in mix.items()) / sum(weights)
    rate = offered * hosts * GPUS / mean_k  # mean lifetime 1
    out: list[Request] = []
    t = rng.expovariate(rate)
    while t < warm + measure:
        out.append(Request(t, rng.choices(sizes, weights)[0], rng.expovariate(1.0)))
        t += rng.expovariate(rate)
    return tuple(out)


# --- in-host choices, tabulated per busy mask (0..255) and size --------------------------------


def _first_partition(state: int, k: int) -> int | None:
    free = [p for p in free_partitions(PARTS, busy_of(state)) if p.size == k]
    return mask(min(free).gpus) if free else None


def _allocated(state: int, k: int) -> int | None:
    try:
        return mask(allocate(PARTS, k, busy=busy_of(state)).gpus)
    except Exception:  # ValidationError: nothing of k free on this host
        return None


def _loss(state: int, taken: int) -> tuple[int, ...]:
    """Free partitions of each size larger than the taken one that placing it breaks."""
    free = free_partitions(PARTS, busy_of(state))
    p = next(q for q in PARTS if mask(q.gpus) == taken)
    before = tuple(
        sum(1 for q in free if q.size == s) for s in sorted({q.size for q in PARTS if q.size > p.size}, reverse=True)
    )
    after = keep_free_score(PARTS, free, p)
    return tuple(b - a for b, a in zip(before, after, strict=True))


def _free(state: int) -> int:
    return GPUS - bin(state).count("1")


@dataclass(frozen=True)
class Policy:
    """``choose[state][k]``: the partition mask taken on a host in ``state`` (None: none fits);
    ``groups[k]``: None (first host that fits) or the states in preference order, grouped by
    equal key (in a group, the lowest host id wins)."""

    name: str
    choose: tuple[dict[int, int | None], ...]
    groups: dict[int, tuple[tuple[int, ...], ...] | None]


def _ranked(
    choose: Sequence[dict[int, int | None]], key: Callable[[int, int, int], tuple[int, ...]], k: int
) -> tuple[tuple[int, ...], ...]:
    keyed: dict[tuple[int, ...], list[int]] = {}
    for s in range(1 << GPUS):
        taken = choose[s][k]
        if taken is not None:
            keyed.setdefault(key(s, k, taken), []).append(s)
    return tuple(tuple(keyed[kk]) for kk in sorted(keyed))


def policies() -> dict[str, Policy]:
    first = tuple({k: _first_partition(s, k) for k in SIZES} for s in range(1 << GPUS))
    alloc = tuple({k: _allocated(s, k) for k in SIZES} for s in range(1 << GPUS))

    def packing(s: int, k: int, taken: int) -> tuple[int, ...]:
        return (*_loss(s, taken), _free(s) - k)

    def fewest_free(s: int, k: int, taken: int) -> tuple[int, ...]:
        return (_free(s),)

    none: dict[int, tuple[tuple[int, ...], ...] | None] = dict.fromkeys(SIZES)
    return {
        "first_fit": Policy("first_fit", first, none),
        "gpufabric": Policy("gpufabric", alloc, {k: _ranked(alloc, packing, k) for k in SIZES}),
        "first_fit_host_allocate": Policy("first_fit_host_allocate", alloc, none),
        "best_fit_host_first_partition": Policy(
            "best_fit_host_first_partition", first, {k: _ranked(first, fewest_free, k) for k in SIZES}
        ),
    }


# --- the fleet -------------------------------------------------------------------------------


@dataclass
class Counts:
    requested: dict[int, int] = field(default_factory=lambda: dict.fromkeys(SIZES, 0))
    refused: dict[int, int] = field(default_factory=lambda: dict.fromkeys(SIZES, 0))
    refused_fleet_free: dict[int, int] = field(default_factory=lambda: dict.fromkeys(SIZES, 0))
    refused_shape: dict[int, int] = field(default_factory=lambda: dict.fromkeys(SIZES, 0))
    util_sum: list[float] = field(default_factory=lambda: [0.0, 0.0])  # first, second half of the window
    util_n: list[int] = field(default_factory=lambda: [0, 0])
    free_at_8_refusals: list[int] = field(default_factory=list)  # fleet free GPUs at each 8-GPU refusal
    checks: int = 0  # fleet.check() calls
    placed: int = 0  # slots handed out (warm-up included)
    released: int = 0  # slots ended before the stream's last arrival
    live_gpus: int = 0  # GPUs in slots still live at the end (= the fleet's busy GPUs)


class Fleet:
    """Hosts' busy masks, per-state member sets (ranked policies) and per-size heaps of hosts
    that can take that size (first-fit), both lazily cleaned."""

    def __init__(self, hosts: int, policy: Policy) -> None:
        self.n, self.policy = hosts, policy
        self.state = [0] * hosts
        self.members: list[set[int]] = [set() for _ in range(1 << GPUS)]
        self.members[0] = set(range(hosts))
        self.heaps: list[list[int]] = [[] for _ in range(1 << GPUS)]
        self.heaps[0] = list(range(hosts))
        self.fits = {k: list(range(hosts)) for k in SIZES}  # every host fits every size at 0
        self.queued = {k: [True] * hosts for k in SIZES}
        self.by_free = [0] * (GPUS + 1)
        self.by_free[GPUS] = hosts
        self.busy = 0
        self.slots: dict[int, list[int]] = {}  # host -> masks of its live slots (check mode)

    def _move(self, h: int, new: int) -> None:
        old = self.state[h]
        self.members[old].discard(h)
        self.state[h] = new
        if h not in self.members[new]:
            self.members[new].add(h)
            heapq.heappush(self.heaps[new], h)
        self.by_free[_free(old)] -= 1
        self.by_free[_free(new)] += 1
        for k in SIZES:
            if not self.queued[k][h] and self.policy.choose[new][k] is not None:
                self.queued[k][h] = True
                heapq.heappush(self.fits[k], h)

    def _first_in(self, s: int) -> int | None:
        heap, members = self.heaps[s], self.members[s]
        while heap and heap[0] not in members:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def pick(self, k: int) -> int | None:
        groups = self.policy.groups[k]
        if groups is None:
            heap, queued = self.fits[k], self.queued[k]
            while heap and self.policy.choose[self.state[heap[0]]][k] is None:
                queued[heapq.heappop(heap)] = False
            return heap[0] if heap else None
        for group in groups:
            best = None
            for s in group:
                if self.members[s]:
                    h = self._first_in(s)
                    if h is not None and (best is None or h < best):
                        best = h
            if best is not None:
                return best
        return None

    def place(self, h: int, k: int) -> int:
        taken = self.policy.choose[self.state[h]][k]
        assert taken is not None and not taken & self.state[h]
        self._move(h, self.state[h] | taken)
        self.busy += k
        return taken

    def release(self, h: int, taken: int) -> None:
        assert self.state[h] & taken == taken
        self._move(h, self.state[h] & ~taken)
        self.busy -= bin(taken).count("1")

    def check(self) -> None:
        """Exact accounting: each host's busy mask is the disjoint union of its live slots; busy
        GPUs counted = the masks' bits; free + busy = all GPUs; the per-free-count tally holds."""
        for h in range(self.n):
            masks = self.slots.get(h, [])
            union = 0
            for m in masks:
                assert not union & m, f"host {h}: overlapping slots"
                union |= m
            assert union == self.state[h], f"host {h}: busy mask {self.state[h]:08b} != slots {union:08b}"
        bits = sum(bin(s).count("1") for s in self.state)
        free = sum(_free(s) for s in self.state)
        assert bits == self.busy and free + self.busy == self.n * GPUS
        assert [sum(1 for s in self.state if _free(s) == c) for c in range(GPUS + 1)] == self.by_free


def simulate(policy: Policy, requests: Sequence[Request], hosts: int, warm: float = WARM,
             measure: float = MEASURE, check: bool = False) -> Counts:  # fmt: skip
    """Run one policy over the stream; count from ``warm`` on."""
    half = warm + measure / 2
    fleet, counts = Fleet(hosts, policy), Counts()
    ends: list[tuple[float, int, int]] = []  # (end time, host, mask)
    total = hosts * GPUS
    for r in requests:
        while ends and ends[0][0] <= r.t:
            _, h, m = heapq.heappop(ends)
            fleet.release(h, m)
            counts.released += 1
            if check:
                fleet.slots[h].remove(m)
                fleet.check()
                counts.checks += 1
        measured = r.t >= warm
        if measured:
            counts.requested[r.k] += 1
            counts.util_sum[r.t >= half] += fleet.busy / total
            counts.util_n[r.t >= half] += 1
        got = fleet.pick(r.k)
        if got is None:
            if measured:
                counts.refused[r.k] += 1
                counts.refused_fleet_free[r.k] += total - fleet.busy >= r.k
                counts.refused_shape[r.k] += any(fleet.by_free[c] for c in range(r.k, GPUS + 1))
                if r.k == GPUS:
                    counts.free_at_8_refusals.append(total - fleet.busy)
        else:
            m = fleet.place(got, r.k)
            counts.placed += 1
            heapq.heappush(ends, (r.t + r.life, got, m))
            if check:
                fleet.slots.setdefault(got, []).append(m)
                fleet.check()
                counts.checks += 1
    if not check:
        for _, h, m in ends:
            fleet.slots.setdefault(h, []).append(m)
    fleet.check()
    counts.checks += 1
    counts.live_gpus = fleet.busy
    return counts


METRICS = ("refused.1", "refused.2", "refused.4", "refused.8", "refused_8_fleet_free", "refused_shape.2",
           "refused_shape.4", "refused_shape.8", "refused_gpu_weighted")  # fmt: skip
COUNTED = ("requested", "refused", "refused_fleet_free", "refused_shape")


def counted(c: Counts) -> dict[str, dict[str, int]]:
    """The raw counts (JSON keys: sizes as strings), what every fraction is computed from."""
    return {name: {str(k): getattr(c, name)[k] for k in SIZES} for name in COUNTED}


def metric(counts: dict[str, dict[str, int]], name: str) -> float | None:
    """One fraction of ``METRICS`` from raw counts (one seed's, or several seeds' summed)."""
    req = counts["requested"]
    if name == "refused_gpu_weighted":
        asked = sum(int(k) * n for k, n in req.items())
        return sum(int(k) * n for k, n in counts["refused"].items()) / asked if asked else None
    if name == "refused_8_fleet_free":
        name = "refused_fleet_free.8"
    what, k = name.split(".")
    return counts[what][k] / req[k] if req[k] else None


def summary_of(c: Counts) -> dict[str, Any]:
    """One policy's run: its counts, every metric, the utilisation (overall and per half of the
    window: equal halves = steady state) and the fleet's free GPUs at its 8-GPU refusals."""
    counts = counted(c)
    return {
        "counts": counts,
        **{m: _round(metric(counts, m)) for m in METRICS},
        "utilisation": _round(sum(c.util_sum) / sum(c.util_n) if sum(c.util_n) else None),
        "utilisation_halves": [_round(u / n if n else None) for u, n in zip(c.util_sum, c.util_n, strict=True)],
        "free_gpus_at_8_refusals_median": statistics.median(c.free_at_8_refusals) if c.free_at_8_refusals else None,
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 4)


def _median(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return _round(statistics.median(vals)) if vals else None


def _pooled(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    return {n: {str(k): sum(r["counts"][n][str(k)] for r in rows) for k in SIZES} for n in COUNTED}


def run_load(hosts: int, seeds: Sequence[int], offered: float) -> dict[str, Any]:
    """Every policy over every seed's stream at one offered load. Summary per policy and metric:
    the median over seeds, the pooled fraction (all seeds' counts summed), and against first-fit
    the pooled ratio and the median of the per-seed ratios (None where first-fit refused none)."""
    pols = policies()
    per_seed: list[dict[str, Any]] = []
    for seed in seeds:
        reqs = stream(seed, hosts, offered=offered)
        row: dict[str, Any] = {"seed": seed, "requests": len(reqs)}
        for name in POLICIES:
            row[name] = summary_of(simulate(pols[name], reqs, hosts))
        per_seed.append(row)
    pooled = {name: _pooled([r[name] for r in per_seed]) for name in POLICIES}
    summary: list[dict[str, Any]] = []
    for name in POLICIES:
        s: dict[str, Any] = {"offered_load": offered, "policy": name}
        s["utilisation_median"] = _median([r[name]["utilisation"] for r in per_seed])
        for m in METRICS:
            s[m] = {"median": _median([r[name][m] for r in per_seed]), "pooled": _round(metric(pooled[name], m))}
            if name != BASELINE:
                s[m]["pooled_vs_first_fit"] = _ratio(metric(pooled[name], m), metric(pooled[BASELINE], m))
                s[m]["median_vs_first_fit"] = _median([_ratio(r[name][m], r[BASELINE][m]) for r in per_seed])
        s["free_gpus_at_8_refusals_median"] = _median([r[name]["free_gpus_at_8_refusals_median"] for r in per_seed])
        summary.append(s)
    return {"offered_load": offered, "summary": summary, "per_seed": per_seed}


def run_slot_packing_bench(hosts: int = HOSTS, seeds: Sequence[int] = SEEDS, loads: Sequence[float] = LOADS,
                           write: bool = True) -> list[dict[str, Any]]:  # fmt: skip
    """Every load; writes bench/results/slot_packing.json; returns the summary rows."""
    t0, cpu0 = time.monotonic(), time.process_time()
    blocks = [run_load(hosts, seeds, offered) for offered in loads]
    out = {
        "benchmark": "slot_packing",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "hosts": hosts,
        "board": DEFAULT_BOARD,
        "seeds": list(seeds),
        "mix_by_count": {str(k): w for k, w in MIX.items()},
        "offered_loads": list(loads),
        "mean_lifetime": 1.0,
        "warm_lifetimes": WARM,
        "measured_lifetimes": MEASURE,
        "baseline": BASELINE,
        "policies": list(POLICIES),
        "wall_s": round(time.monotonic() - t0, 2),
        "cpu_s": round(time.process_time() - cpu0, 2),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "loads": blocks,
    }
    if write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    return [s for b in blocks for s in b["summary"]]


if __name__ == "__main__":
    for line in run_slot_packing_bench():
        print(json.dumps(line))
