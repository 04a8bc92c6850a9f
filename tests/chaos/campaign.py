"""A seeded fault campaign (issue 35, its skeleton): a nemesis injects faults from a schedule made
by ``random.Random(seed)`` while a workload issues moves, leases and cancels through the API at a
steady rate and the independent checker (tests/chaos/checker.py) samples the real fabrics.

Faults that run here cheaply, on the lab's own processes:
  ``serve_kill``    kill -9 of ``gpufabric serve``, restarted on the same port
  ``ovsdb_restart`` kill -9 of the lab's ``ovsdb-server``, restarted with the lab's command line
  ``opensm_kill``   kill -9 of the lab's trusted OpenSM (master), restarted by ``Lab.restart_sm``
  ``fmpm_restart``  a node's Fabric Manager stand-in restarted (``--standin-restart``: it forgets
                    its active partitions; the reconcile loop must replay them)

The same seed gives the same schedule (``schedule``); a failing run prints its seed and the fault
timeline (``report``). Replay the schedule: ``python tests/chaos/campaign.py --seed N --duration S``.
This module may use the lab's helpers to inject faults; the checker never imports gpufabric.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for ``chaos.checker`` when run as a script

from chaos.checker import (
    FINISHED,
    OPEN,
    Inventory,
    Persistence,
    convergence,
    disagreements,
    failed_outside_quarantine,
    final_state_errors,
    gpu_overlaps,
    latest_failed,
    move_outcomes,
    owners,
    percentile,
    splits,
    unstable,
)
from chaos.readers import Api, FabricReader

FAULTS = ("serve_kill", "ovsdb_restart", "opensm_kill", "fmpm_restart")


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the campaign starts
    kind: str
    target: str = ""  # fmpm_restart: the node
    down: float = 0.0  # seconds the component stays down before its restart


def schedule(
    seed: int, duration: float, kinds: Sequence[str] = FAULTS, mean_gap: float = 20.0, min_gap: float = 8.0,
    nodes: Sequence[str] = (),
) -> list[Fault]:  # fmt: skip
    """The fault timeline of a campaign: exponential gaps (at least ``min_gap``), kinds and targets
    drawn from ``random.Random(seed)`` only: the same arguments give the same list."""
    rng = random.Random(seed)
    out: list[Fault] = []
    t = rng.uniform(min_gap / 2, mean_gap)
    while t < duration:
        kind = rng.choice(list(kinds))
        target = rng.choice(list(nodes)) if kind == "fmpm_restart" and nodes else ""
        out.append(Fault(round(t, 3), kind, target, round(rng.uniform(0.5, 3.0), 3)))
        t += max(min_gap, rng.expovariate(1 / mean_gap))
    return out


# ---- the serve process the nemesis kills ----------------------------------------------------
class Server:
    """``gpufabric serve`` on a fixed port, killed with -9 and started again on the same port."""

    def __init__(
        self, env: Mapping[str, str], port: int, args: Sequence[str], log: IO[Any] | int = subprocess.DEVNULL
    ) -> None:
        self.env, self.port, self.args, self.log = dict(env), port, list(args), log
        self.proc: subprocess.Popen[Any] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90) -> None:
        exe = str(Path(sys.executable).parent / "gpufabric")
        self.proc = subprocess.Popen([exe, "serve", "--port", str(self.port), *self.args], env=self.env,
                                     stdout=self.log, stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(self.base + "/readyz", timeout=2).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gpufabric serve did not answer /readyz (exit {self.proc.poll()})") from None
                time.sleep(0.2)

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill9()


# ---- the nemesis ----------------------------------------------------------------------------
def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _kill9(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(100):  # a detached daemon is not our child: wait until it is gone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


class Nemesis:
    """Injects one :class:`Fault` into the lab at ``home`` (and the ``server``); returns when the
    component is back (the time convergence is measured from)."""

    def __init__(self, home: Path, server: Server) -> None:
        self.home, self.server = Path(home), server

    def inject(self, f: Fault) -> str:
        return str(getattr(self, f.kind)(f))

    def serve_kill(self, f: Fault) -> str:
        self.server.kill9()
        time.sleep(f.down)
        self.server.start()
        return f"serve restarted on :{self.server.port}"

    def ovsdb_restart(self, f: Fault) -> str:
        d = self.home / "lab" / "ovs"
        _kill9(_pid(d / "ovsdb-server.pid"))
        time.sleep(f.down)
        env = {**os.environ, "OVS_RUNDIR": str(d), "OVS_DBDIR": str(d), "OVS_LOGDIR": str(d)}
        subprocess.run(["ovsdb-server", str(d / "conf.db"), f"--remote=punix:{d / 'db.sock'}",
                        f"--pidfile={d / 'ovsdb-server.pid'}", f"--log-file={d / 'ovsdb-server.log'}",
                        f"--unixctl={d / 'ovsdb-server.ctl'}", "--detach"], env=env, check=True, timeout=30,
                       capture_output=True)  # fmt: skip
        return f"ovsdb-server restarted (pid {_pid(d / 'ovsdb-server.pid')})"

    def opensm_kill(self, f: Fault) -> str:
        from gpufabric.lab.lab import Lab  # the lab's own restart (the checker never imports gpufabric)

        _kill9(_pid(self.home / "lab" / "ib" / "opensm.pid"))
        time.sleep(f.down)
        out = Lab(self.home).restart_sm()
        return f"OpenSM restarted (pid {out.get('opensm_pid')})"

    def fmpm_restart(self, f: Fault) -> str:
        fm = self.home / "lab" / "nvlink" / f"{f.target}.fm"
        subprocess.run([sys.executable, "-m", "gpufabric.lab.fmpm_standin", "--unix-domain-socket", str(fm),
                        "--standin-restart"], check=True, timeout=30, capture_output=True)  # fmt: skip
        return f"Fabric Manager of {f.target} restarted (active set forgotten)"


# ---- the workload ---------------------------------------------------------------------------
@dataclass
class Workload:
    """Moves (to a tenant or quarantine), leases, and cancels of failed moves, one op every ``period`` s."""

    api: Api
    nodes: Sequence[str]
    tenants: Sequence[str]
    seed: int
    period: float = 1.5
    requested: dict[int, str] = field(default_factory=dict)  # move id -> node
    ambiguous: dict[str, int] = field(default_factory=dict)  # node -> requests whose answer was lost
    refused: int = 0
    unavailable: int = 0  # connection refused: the server was down, the request never reached it
    cancels: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        rng = random.Random(self.seed ^ 0x5EED)
        while not self.stop.wait(self.period):
            node = rng.choice(list(self.nodes))
            try:
                self.step(rng, node)
            except urllib.error.URLError as e:
                if isinstance(e.reason, ConnectionRefusedError):
                    self.unavailable += 1
                else:  # sent, and the answer lost (the server died): the request's fate is unknown
                    self.ambiguous[node] = self.ambiguous.get(node, 0) + 1
            except OSError:
                self.ambiguous[node] = self.ambiguous.get(node, 0) + 1

    def step(self, rng: random.Random, node: str) -> None:
        op = rng.random()
        if op < 0.2:
            code, body = self.api.call("POST", "/leases", {"tenant": rng.choice(list(self.tenants)), "node": node})
        else:
            to = rng.choice([*self.tenants, "quarantine"])
            code, body = self.api.call("POST", "/moves", {"node": node, "to_tenant": to})
        if code == 202 and isinstance(body, dict) and "id" in body:
            self.requested[int(body["id"])] = node
        elif code >= 500:
            self.ambiguous[node] = self.ambiguous.get(node, 0) + 1
        else:
            self.refused += 1
            if code == 409:  # an open move holds the node: cancel it when it failed
                c, page = self.api.call("GET", f"/moves?node={node}&state=failed")
                for m in page.get("items", []) if c == 200 and isinstance(page, dict) else []:
                    if self.api.call("POST", f"/moves/{m['id']}/cancel")[0] == 200:
                        self.cancels += 1


# ---- the checker's thread -------------------------------------------------------------------
@dataclass
class Watch:
    """Samples the fabrics and the move history until stopped; keeps what the invariants found."""

    reader: FabricReader
    inv: Inventory
    api: Api
    grace: float = 45.0
    interval: float = 0.5
    rounds: int = 0
    read_errors: int = 0
    split_seen: list[str] = field(default_factory=list)
    failed_in_tenant: list[str] = field(default_factory=list)
    healthy: list[tuple[float, bool]] = field(default_factory=list)
    persistence: Persistence = field(init=False)
    moving: set[str] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.persistence = Persistence(self.grace)
        self.segments = self.api.segments()

    def _failed(self) -> dict[str, int] | None:
        try:
            moves = self.api.moves()
        except (OSError, RuntimeError):
            return None  # the server is down: keep the last known moving set
        self.moving = {m["node"] for m in moves if m["status"] in OPEN}
        return latest_failed(moves)

    def once(self) -> tuple[Any, list[str]]:
        failed_before = self._failed()
        s = self.reader.sample()
        failed_after = self._failed()
        if self.rounds % 10 == 0:
            try:
                self.segments = self.api.segments()
            except (OSError, RuntimeError):
                pass
        own = owners(s, self.inv, self.segments)
        moved = unstable(s, self.inv)
        bad = splits(own, moved) + gpu_overlaps(s)
        if failed_before is not None and failed_after is not None:
            self.failed_in_tenant += failed_outside_quarantine(own, failed_before, failed_after)
        self.split_seen += [f"t={s.t:.1f} {b}" for b in bad]
        dis = disagreements(own, self.moving | moved)
        self.persistence.feed(s.t, dis)
        self.healthy.append((s.t, not s.errors and not dis))
        self.rounds += 1
        self.read_errors += bool(s.errors)
        return own, bad

    def run(self) -> None:
        while not self.stop.is_set():
            self.once()
            self.stop.wait(self.interval)


# ---- one campaign ---------------------------------------------------------------------------
def run_campaign(
    status: Mapping[str, Any], server: Server, token: str, seed: int, duration: float,
    tenants: Sequence[str] = ("alpha", "beta"), mean_gap: float = 20.0, grace: float = 45.0, drain: float = 240.0,
) -> dict[str, Any]:  # fmt: skip
    """Run workload + nemesis + checker for ``duration`` s, drain, and check the end state."""
    inv = Inventory.from_status(status)
    nodes = [n.name for n in inv.nodes]
    api = Api(server.base, token)
    before = [int(m["id"]) for m in api.moves()]
    plan = schedule(seed, duration, mean_gap=mean_gap, nodes=nodes)
    nemesis = Nemesis(Path(status["home"]), server)
    watch = Watch(FabricReader(inv), inv, api, grace)
    work = Workload(api, nodes, tenants, seed)
    threads = [threading.Thread(target=watch.run, daemon=True), threading.Thread(target=work.run, daemon=True)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    timeline: list[dict[str, Any]] = []
    try:
        for f in plan:
            time.sleep(max(0.0, t0 + f.at - time.monotonic()))
            start = time.monotonic()
            try:
                what = nemesis.inject(f)
            except Exception as e:
                what = f"INJECTION FAILED: {e}"
            timeline.append({"at": round(start - t0, 2), "kind": f.kind, "target": f.target, "back": time.monotonic(),
                             "what": what})  # fmt: skip
        time.sleep(max(0.0, t0 + duration - time.monotonic()))
    finally:
        work.stop.set()
        threads[1].join(timeout=60)
        if server.proc is None or server.proc.poll() is not None:
            server.start()
    # drain: every requested move ends; then the fabrics must rest in agreement
    deadline = time.monotonic() + drain
    history = api.moves()
    while time.monotonic() < deadline and any(m["status"] not in FINISHED for m in history):
        time.sleep(1)
        history = api.moves()
    settle = time.monotonic() + grace
    while time.monotonic() < settle and not (watch.healthy and watch.healthy[-1][1]):
        time.sleep(1)
    watch.stop.set()
    threads[0].join(timeout=60)
    own, _ = watch.once()
    history = api.moves()
    rep = move_outcomes(work.requested, history, work.ambiguous, before)
    conv = convergence([e["back"] for e in timeline], watch.healthy)
    for ev, c in zip(timeline, conv, strict=True):
        ev["converged_s"] = None if c is None else round(c, 2)
        ev.pop("back")
    done = [c for c in conv if c is not None]
    counts: dict[str, int] = {}
    for ev in timeline:
        counts[ev["kind"]] = counts.get(ev["kind"], 0) + 1
    return {
        "seed": seed,
        "duration_s": duration,
        "faults": counts,
        "timeline": timeline,
        "moves_requested": len(work.requested),
        "moves_outcomes": rep.outcomes,
        "moves_refused": work.refused,
        "cancels": work.cancels,
        "unavailable": work.unavailable,
        "ambiguous_requests": sum(work.ambiguous.values()),
        "lost": rep.lost,
        "duplicated": rep.duplicated,
        "unfinished": rep.unfinished,
        "unrequested": rep.unrequested,
        "running_twice": rep.running_twice,
        "splits": watch.split_seen,
        "persistent_disagreements": watch.persistence.violations,
        "failed_in_tenant": watch.failed_in_tenant,
        "final_state_errors": final_state_errors([m for m in history if int(m["id"]) not in set(before)], own),
        "final_disagreements": disagreements(own),
        "unconverged_faults": sum(c is None for c in conv),
        "converge_p50_s": percentile(done, 50),
        "converge_p99_s": percentile(done, 99),
        "sampler_rounds": watch.rounds,
        "sampler_rounds_with_read_errors": watch.read_errors,
    }


def violations(r: Mapping[str, Any]) -> list[str]:
    """What makes a campaign fail (empty: it passed)."""
    checks = ("splits", "lost", "duplicated", "unfinished", "unrequested", "running_twice", "persistent_disagreements",
              "failed_in_tenant", "final_state_errors", "final_disagreements")  # fmt: skip
    out = [f"{k}: {r[k]}" for k in checks if r[k]]
    if r["unconverged_faults"]:
        out.append(f"{r['unconverged_faults']} fault(s) never converged")
    return out


def report(r: Mapping[str, Any]) -> str:
    lines = [
        f"chaos campaign seed={r['seed']} duration={r['duration_s']}s faults={r['faults']}",
        f"  moves requested={r['moves_requested']} outcomes={r['moves_outcomes']} refused={r['moves_refused']} "
        f"cancels={r['cancels']} unavailable={r['unavailable']} ambiguous={r['ambiguous_requests']}",
        f"  splits={len(r['splits'])} lost={len(r['lost'])} duplicated={len(r['duplicated'])} "
        f"unfinished={len(r['unfinished'])} converge p50={r['converge_p50_s']}s p99={r['converge_p99_s']}s "
        f"sampler rounds={r['sampler_rounds']} (with read errors {r['sampler_rounds_with_read_errors']})",
    ]
    bad = violations(r)
    if bad:
        lines.append(
            f"  FAILED (replay: python tests/chaos/campaign.py --seed {r['seed']} --duration {r['duration_s']}):"
        )
        lines += [f"    {v}" for v in bad]
    lines.append("  timeline:")
    lines += [f"    t={e['at']:7.2f} {e['kind']:<14} {e['target']:<8} converged in {e['converged_s']}s: {e['what']}"
              for e in r["timeline"]]  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Print the fault schedule of a seed (the replay of a campaign's faults).")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--mean-gap", type=float, default=20.0)
    ap.add_argument("--nodes", default="gpu-a01,gpu-a02,gpu-a03,gpu-a04")
    a = ap.parse_args(argv)
    for f in schedule(a.seed, a.duration, mean_gap=a.mean_gap, nodes=a.nodes.split(",")):
        print(f"t={f.at:8.3f} {f.kind:<14} {f.target:<8} down {f.down:.3f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
