"""The move workflow: old tenant -> quarantine -> new tenant on every fabric, crash-safe.

A move is a durable intent in the store. A worker claims a batch of pending moves — those
requested together, and all that arrived while its previous batch ran (:meth:`MoveEngine.run_pending`:
a lone move is claimed at once) — then runs each phase for the
whole batch over every registered fabric: one plan, split so that every removal on every
fabric is applied and verified before any addition on any fabric; each fabric's backend
applies its part (one transaction per switch, one SM sweep, ...) and returns the verified
read-back of what it changed. The phase is recorded only after that, so a crash (kill -9
anywhere) leaves the move at a phase that is simply run again: every port is then in its old
tenant, quarantine, or its new tenant — never two tenants.

A warm worker keeps its last verified state and plans against it while the fabric epoch
shows that no other writer touched the fabrics since (full-fabric drift is the business of
reconcile and the audit); otherwise it reads the fabrics first. A failure on any fabric
sends every port of the batch's nodes on every fabric to quarantine and fails the moves; a failure
that belongs to one move (its lease swap, or its own join plan: :mod:`~gpufabric.engine.isolation`)
fails that move only. The store (or the fabric lock's connection) lost mid-phase fails nothing: the
batch goes back in the queue as soon as the store answers again, and is run from its recorded phases.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import InterfaceError, OperationalError

from gpufabric.domain.errors import GpufabricError, VerifyError
from gpufabric.domain.fabric import FabricKind, Tenancy
from gpufabric.domain.models import QUARANTINE, Lease
from gpufabric.domain.moves import Move, MovePhase, MoveStatus
from gpufabric.domain.segments import SegmentConfig
from gpufabric.domain.state import FabricState
from gpufabric.domain.terms import LeaseTerms
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.isolation import JoinPlanError, fail_alone, failsafe, refuse_joining
from gpufabric.engine.results import BatchResult as BatchResult
from gpufabric.engine.results import PhaseTiming as PhaseTiming
from gpufabric.engine.resume import advance, to_prepare
from gpufabric.planning.desired import DesiredState, derive_desired, tenancy_of
from gpufabric.planning.plan import Plan, as_observed, merge, plan
from gpufabric.store.core import Store
from gpufabric.store.liveness import HeartbeatWatch
from gpufabric.store.lock import LockLostError, bump_epoch, bump_in, read_epoch
from gpufabric.store.moves import ClaimLostError, MoveLedger
from gpufabric.store.tx import Tx
from gpufabric.store.view import Epoch, StoreView, ViewReader

Progress = Callable[[str, str], None]  # (phase, message)
STORE_DOWN = (OperationalError, InterfaceError, LockLostError)  # the store (or its fabric lock) unreachable
STALE_BEATS = 3  # a running move whose heartbeat this worker saw unchanged this many intervals: taken over
GONE_BEATS = 1  # ... this many, when the fabric-lock session it ran under is gone (store/liveness.py)
STORE_RESUMES = 3  # times one run_batch resumes a batch the store dropped mid-phase before it gives up


class _Refused(Exception):
    """A fabric refused a batch in ``before_move``: its moves are cancelled, nothing changed."""

    def __init__(self, error: GpufabricError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True)
class Prepared:
    """A converge phase's desired state, and its plan when the last verified state could be used."""

    desired: DesiredState
    plan: Plan | None


def checkpoint(name: str) -> None:
    """A named point where the crash tests may kill this process (``GPUFABRIC_KILL_AT=name``)."""
    if os.environ.get("GPUFABRIC_KILL_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


class MoveEngine:
    """Runs moves against the store and the fabrics. ``store`` is a service Store."""

    def __init__(
        self,
        store: Store,
        fabrics: Fabrics,
        cfg: SegmentConfig,
        worker: str = "",
        verify_timeout: float = 30.0,
        progress: Progress | None = None,
        heartbeat_every: float = 5.0,
        store_wait: float = 60.0,
        store_poll: float = 0.25,
        settle: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.ledger = MoveLedger(store)
        self.fabrics = fabrics
        self.kinds: list[FabricKind[Any, Any]] = fabrics.kind_list()
        self.cfg = cfg
        self.worker = worker or f"{os.uname().nodename}:{os.getpid()}"
        self.verify_timeout = verify_timeout
        self.progress = progress or (lambda _p, _m: None)
        self.settle = settle or (lambda: None)  # waits until the progress given so far is stored (it may lag)
        self.heartbeat_every = heartbeat_every
        self.store_wait = store_wait  # how long a batch the store dropped waits for it here (s)
        self.store_poll = store_poll
        self._interrupted: list[Move] = []  # a batch the store dropped, to requeue when it answers
        self.watch = HeartbeatWatch()  # other workers' heartbeats, as this worker sees them
        self._known: FabricState | None = None  # last verified state of every fabric
        self._known_epoch: Epoch | None = None
        self._joining: frozenset[str] = frozenset()  # the nodes the running batch gives a tenant
        self.reader = ViewReader(store)

    # ----------------------------------------------------------------- desired state
    def view(self) -> StoreView:
        """One read of what the desired state is derived from (one transaction)."""
        return self.reader.read()[0]

    def desired(
        self, view: StoreView | None = None, extra_quarantine: Sequence[str] = (), leases: Sequence[Lease] | None = None
    ) -> DesiredState:
        v = view or self.view()
        overrides = {n: QUARANTINE for n in (*v.held_in_quarantine, *extra_quarantine)}
        settings = {**self.fabrics.settings, **self.cfg.settings()}
        t = tenancy_of(v.nodes, v.leases if leases is None else leases, v.networks, v.offerings, settings, overrides)
        return derive_desired(self.kinds, t)

    # ----------------------------------------------------------------- the fabrics' state
    def known_state(self, epoch: Epoch | None = None) -> tuple[FabricState, bool]:
        """The last verified state if no other writer touched the fabrics since (``epoch``: the
        fabric epoch just read, else it is read now), else a fresh read. Call under the fabric
        lock. Returns (state, whether it was read now)."""
        if self._known is not None and self._known_epoch == (epoch or read_epoch(self.store)):
            return self._known, False
        self.progress("observe", "reading every fabric")
        self._known = self.fabrics.observe(audit=False)  # a move does not read what only the audit needs
        self._known_epoch = read_epoch(self.store)
        return self._known, True

    def adopt(self, state: FabricState, wrote: bool = False) -> None:
        """Take ``state``, just read from every fabric under the fabric lock, as the known state;
        ``wrote``: this worker changed the fabrics besides a converge (containment), so the epoch
        is bumped and no other worker trusts what it read before."""
        self._known = state
        self._known_epoch = bump_epoch(self.store, self.worker) if wrote else read_epoch(self.store)

    def forget(self) -> None:  # the next phase reads the fabrics
        self._known, self._known_epoch = None, None

    # ----------------------------------------------------------------- one converge step
    def converge(self, label: str, extra_quarantine: Sequence[str] = ()) -> PhaseTiming:
        """Apply the desired state to the fabrics, removals everywhere first, holding the
        fabric lock (one worker at a time computes, applies and verifies)."""
        with self.ledger.lock.held():
            return self._converge(label, extra_quarantine)

    def _prepare(self, tx: Tx, extra_quarantine: Sequence[str] = (), join: bool = False) -> Prepared:
        """In the store transaction ``tx``, under the fabric lock: read the desired state's inputs
        and, when the last verified state is still the last word (epoch unchanged), plan against
        it and — if there is anything to apply — bump the epoch in the same transaction, before
        the first write: whatever happens from there (an error, kill -9 mid-apply), no other
        worker trusts a read-back it took before. Cold (epoch moved), the plan waits for a read
        of the fabrics outside the transaction."""
        view, epoch = self.reader.read_in(tx)
        desired = self.desired(view, extra_quarantine=extra_quarantine)
        if self._known is None or self._known_epoch != epoch:
            return Prepared(desired, None)
        p = self._plan(desired, self._known, join)
        if not p.empty:
            self._known_epoch = bump_in(tx, self.worker)
        return Prepared(desired, p)

    def _plan(self, desired: DesiredState, state: FabricState, join: bool) -> Plan:
        """The plan; in the join phase a planning failure or a fabric's refusal of a node this batch
        joins (FabricPlan.refusals) is a JoinPlanError (nothing applied: the batch isolates its moves)."""
        try:
            return refuse_joining(plan(self.kinds, desired, state), self._joining if join else ())
        except GpufabricError as e:
            if join:
                raise JoinPlanError(e) from e
            raise

    def _converge(
        self, label: str, extra_quarantine: Sequence[str] = (), ready: Prepared | None = None, prepared: Sequence[Move] = ()
    ) -> PhaseTiming:
        try:
            return self._converge_once(label, extra_quarantine, ready, prepared)
        finally:
            self.settle()  # the phase's progress is stored before its end (or its failure) is

    def _converge_once(
        self, label: str, extra_quarantine: Sequence[str], ready: Prepared | None, prepared: Sequence[Move] = ()
    ) -> PhaseTiming:
        """``prepared``: moves whose ``before_move`` just passed, marked prepared (holding their
        node in quarantine) in the transaction that reads the desired state: one commit, before any write."""
        t0 = time.monotonic()
        if ready is None:
            with self.store.tx() as tx:
                if prepared:
                    self.ledger.mark_prepared(prepared, tx)
                ready = self._prepare(tx, extra_quarantine)
        desired, p, observed_first = ready.desired, ready.plan, False
        if p is None:
            state, observed_first = self.known_state()
            p = self._plan(desired, state, label == "join")
            if not p.empty:
                self._known_epoch = bump_epoch(self.store, self.worker)  # before the first write (above)
        else:
            assert self._known is not None
            state = self._known
        applied: dict[str, float] = {}
        if not p.empty:
            removals, additions = p.split()
            try:
                for step, part in (("remove", removals), ("add", additions)):
                    if part.empty:
                        continue
                    counts = ", ".join(f"{n} {c}" for n, c in part.counts().items() if c)
                    self.progress(label, f"{step}: applying {counts}")
                    self.ledger.lock.check()  # fenced right before the write: a worker woken from a freeze writes nothing
                    read_back, timings = self.fabrics.apply(
                        part, on_done=lambda dev, sec: self.progress(label, f"{dev} verified in {sec:.2f}s")
                    )
                    for k, v in timings.items():
                        applied[f"{k}:{step}"] = v
                    state = merge(self.kinds, state, read_back)
                    self.ledger.lock.check()
            except BaseException:
                self.forget()  # what the fabrics hold now is unknown
                raise
            checkpoint(f"{label}:applied")
            rest = plan(self.kinds, desired, state)
            if not rest.empty:
                self.forget()
                raise VerifyError(
                    f"fabrics still differ from desired after apply: {rest.lines()[:3]}",
                    fabric=",".join(rest.nonempty()),
                    remaining=len(rest.lines()),
                )
            self._known = state
        return PhaseTiming(label, time.monotonic() - t0, applied, len(p), p, state, observed_first)

    def preview(self, node: str, to_tenant: str, networks: tuple[str, ...], terms: LeaseTerms = (),
                offering: str = "baremetal") -> dict[str, Plan]:  # fmt: skip
        """The plans a move would apply, per phase, computed without changing anything."""
        self.store.node(node)  # NotFoundError before anything else
        view = self.view()
        with self.ledger.lock.held():
            observed, _ = self.known_state()
        first = self.desired(view, extra_quarantine=[node])
        leases = [x for x in view.leases if x.node != node]
        if to_tenant != QUARANTINE:
            leases.append(Lease(to_tenant, node, datetime.now(UTC), None, networks, offering, terms=terms))
        second = self.desired(view, leases=leases)
        return {
            "quarantine": plan(self.kinds, first, observed),
            "join": plan(self.kinds, second, as_observed(self.kinds, first)),
        }

    # ----------------------------------------------------------------- moves
    @contextmanager
    def _heartbeat(self, moves: Sequence[Move]) -> Iterator[None]:
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.heartbeat_every):
                try:
                    self.ledger.heartbeat(list(moves), self.worker)
                except Exception:
                    continue

        t = threading.Thread(target=beat, name="move-heartbeat", daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join(timeout=5)

    def run_batch(self, moves: Sequence[Move]) -> BatchResult:
        """Run claimed moves through their remaining phases together, holding the fabric lock
        from the quarantine phase to the end of join: the swap's transaction also reads (and
        plans) what join applies, as no other worker can write to the fabrics in between.

        A move that fails alone (its lease swap, or its own join plan) is failed alone, its node
        held in quarantine; the others go on. Any other error fails the batch: every port of its nodes goes to
        quarantine. The store unreachable mid-phase fails nothing: the batch is put back in the
        queue as soon as the store answers again (:meth:`_store_lost`) and run again from its
        recorded phases (each is idempotent), here at once."""
        for attempt in range(1, STORE_RESUMES + 2):
            try:
                return self._run_batch(moves)
            except STORE_DOWN as e:
                self.forget()  # what the fabrics hold now is unknown
                self._interrupted = [m for m in moves if m.id is not None]
                if attempt > STORE_RESUMES:
                    raise
                moves = self._store_lost(e)
                if not moves:
                    return BatchResult([], [])
        raise AssertionError("unreachable")

    def _store_lost(self, cause: Exception) -> list[Move]:
        """The store failed mid-phase: wait until it answers (at most ``store_wait`` s, polling
        every ``store_poll`` s), put back in the queue the moves of the batch this worker still
        holds (``_interrupted``), and claim them again; the moves to run. Still unreachable:
        raises ``cause``, and the next :meth:`run_pending` requeues them first."""
        reason = f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"[:300]
        with contextlib.suppress(Exception):  # the progress of a serve worker is written to the store
            self.progress("store", f"store unreachable mid-phase ({reason}); resuming as soon as it answers")
        deadline = time.monotonic() + self.store_wait
        while not self.ledger.reachable():
            if time.monotonic() >= deadline:
                raise cause
            time.sleep(self.store_poll)
        return self._resume_interrupted(reason)

    def _resume_interrupted(self, reason: str) -> list[Move]:
        requeued = self.ledger.requeue(self._interrupted, reason)
        self._interrupted = []
        return self.ledger.claim_ids(self.worker, [m.id for m in requeued if m.id is not None])

    def _run_batch(self, moves: Sequence[Move]) -> BatchResult:
        """:meth:`run_batch`, once."""
        s = self.ledger
        timings: list[PhaseTiming] = []
        batch = list(moves)
        failed: list[Move] = []
        order = {m.id: i for i, m in enumerate(moves)}
        rest = False
        with self._heartbeat(batch):
            try:
                with s.locked(batch, self.worker):  # the lock's session recorded: its end tells a watcher
                    fresh = to_prepare(s, batch)  # taken over after before_move: not prepared again
                    prepared: list[Move] = []
                    if fresh:
                        try:  # gates and drains: a refusal cancels the moves not yet started, nothing changed
                            self._before_move(fresh)
                        except GpufabricError as e:
                            self.settle()  # the progress reported so far, before the moves end
                            failed += s.refuse(fresh, e.message)
                            refused = {x.id for x in fresh}
                            batch = [m for m in batch if m.id not in refused]
                            if not batch:
                                raise _Refused(e) from None
                        else:  # drained: from the quarantine phase's first transaction each holds its node there
                            prepared = fresh
                    if any(m.phase is MovePhase.QUARANTINE for m in batch):
                        timings.append(self._converge("quarantine", prepared=prepared))
                        checkpoint("quarantine:verified")
                    ready: Prepared | None = None
                    self._joining = frozenset(m.node for m in batch if m.to_tenant != QUARANTINE)
                    before_join = (MovePhase.QUARANTINE, MovePhase.SWAP)
                    if any(m.phase in before_join for m in batch):  # quarantine verified: swap, one transaction
                        t0 = time.monotonic()
                        with self.store.tx() as tx:  # the swap, then (same transaction) what join applies
                            swapped = advance(batch, before_join, lambda ms: s.swap_leases(ms, tx))
                            ready = self._prepare(tx, join=True)  # a JoinPlanError rolls the swap back
                        batch = swapped  # committed
                        failed += [m for m in batch if m.status is MoveStatus.FAILED]  # alone: held in quarantine
                        batch = [m for m in batch if m.status is not MoveStatus.FAILED]
                        timings.append(PhaseTiming("swap", time.monotonic() - t0))
                        checkpoint("swap:committed")
                    if any(m.phase is MovePhase.JOIN for m in batch):
                        timings.append(self._converge("join", ready=ready))
                        checkpoint("join:verified")
                        self.fabrics.after_join(self.tenancy, [m for m in batch if m.phase is MovePhase.JOIN])
                        done = [(t.phase, f"{t.phase} done: {t.changes} change(s)", round(t.seconds, 4)) for t in timings]
                        batch = s.set_phases(batch, MovePhase.DONE, events=done)  # the timings with the end
            except (ClaimLostError, LockLostError):
                raise  # another worker owns these moves now: touch nothing
            except _Refused as r:
                raise r.error from None  # cancelled, nothing changed: no failsafe
            except JoinPlanError as e:
                alone = fail_alone(self, batch)
                if alone is None:
                    failsafe(self.converge, [m.node for m in batch], e.cause)
                    batch = [s.fail(m, e.cause.message) for m in batch]
                    raise e.cause from None
                failed += alone
                batch = [m for m in batch if m.id not in {x.id for x in alone}]
                rest = True
            except GpufabricError as e:
                failsafe(self.converge, [m.node for m in batch], e)
                batch = [s.fail(m, e.message) for m in batch]
                raise
        if rest:  # the moves a join plan failed for failed alone: the others go on
            more = self._run_batch(batch)
            batch, timings = more.moves, [*timings, *more.timings]
        return BatchResult(sorted([*batch, *failed], key=lambda m: order.get(m.id, 0)), timings)

    def tenancy(self) -> Tenancy:
        """Who owns each node now (the leases in the store, no move's quarantine hold)."""
        v = self.view()
        settings = {**self.fabrics.settings, **self.cfg.settings()}
        return tenancy_of(v.nodes, v.leases, v.networks, v.offerings, settings)

    def _before_move(self, moves: Sequence[Move]) -> None:
        if moves:
            self.progress("prepare", f"checking and preparing {len(moves)} node(s) on every fabric")
            self.fabrics.before_move(self.tenancy, moves)

    def run_pending(self, window: float = 0.0, limit: int = 64, stale_after: float = 120.0) -> BatchResult | None:
        """Claim pending (and crashed) moves and run them as one batch; None when there was nothing to do.

        What it coalesces: the moves requested together (one request, one transaction) and every
        move that arrived while this worker's previous batch ran — all queued by now, so a lone
        move is claimed at once, with no wait. ``window``: when this worker's last look saw
        another worker's batch running (a claim now would wait for the fabric lock anyway), it
        waits this long first, so that the requests arriving meanwhile share its batch."""
        if window and self.watch.others_running(self.worker):
            time.sleep(window)
        if self._interrupted:  # a batch the store dropped: back in the queue first (see run_batch)
            self.ledger.requeue(self._interrupted, "the store was unreachable")
            self._interrupted = []
        beat = self.heartbeat_every
        claimed = self.ledger.claim(self.worker, limit, stale_after, self.watch, STALE_BEATS * beat, GONE_BEATS * beat)
        if not claimed:
            return None
        return self.run_batch(claimed)

    def idle_wait(self, tick: float) -> float:
        """An idle worker's wait before its next claim: ``tick``, or until another's move turns stale."""
        due = self.watch.due_in(STALE_BEATS * (b := self.heartbeat_every), exclude=self.worker, gone_after=GONE_BEATS * b)
        return tick if due is None else min(tick, due + 0.005)
