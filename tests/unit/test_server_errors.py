"""``gpufabric_errors{kind}`` counts failed reconcile passes by error type (docs/deploy.md): the
counter existed but nothing fed it, so the series stayed at zero whatever failed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from gpufabric.domain.errors import FabricError
from gpufabric.engine.reconcile import Policy
from gpufabric.runtime.server import ServerLoops
from gpufabric.store.core import Store
from gpufabric.store.registry import parse_segments


def test_a_failed_reconcile_pass_counts_in_gpufabric_errors(tmp_path: Path) -> None:
    said: list[str] = []
    with Store.open(f"sqlite:///{tmp_path}/gf.db") as store:
        srv = ServerLoops(store, tmp_path / "no-fabrics.yaml", parse_segments, Policy.REPAIR, 0.0, say=said.append)
        failed = threading.Event()

        def reconcile() -> None:
            failed.set()
            raise FabricError("the SM did not answer", fabric="infiniband")

        srv.loops.start("reconcile", reconcile, 30.0)
        srv.loops.start("worker", lambda: (_ for _ in ()).throw(RuntimeError("store gone")), 30.0)
        assert failed.wait(10)
        deadline = time.monotonic() + 10
        while len(said) < 2:
            assert time.monotonic() < deadline, said
            time.sleep(0.01)
        srv.loops.shutdown()
        metrics = srv.telemetry.render()
    assert 'gpufabric_errors_total{kind="FabricError"} 1.0' in metrics, metrics
    assert "RuntimeError" not in metrics  # only reconcile passes count (the worker's line is said, not counted)
    assert sorted(said) == ["reconcile pass failed (will retry): the SM did not answer",
                            "worker pass failed (will retry): store gone"]  # fmt: skip
