"""The sustained-churn benchmark's 20-second variant (bench/bench_churn.py): moves arrive
continuously through one warm worker on a 1,000-HCA ibsim fabric + OVS; an independent
sampler (ovs-vsctl, smpquery) never sees a node in two tenants and the audit ends clean."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for ``bench``


@pytest.mark.full  # bench_churn runs the same for 300 s; make test keeps the crash and backup-under-load samplers
def test_churn_20s_no_split_and_clean_audit() -> None:
    from bench.bench_churn import run_churn

    r = run_churn(duration=20)
    assert r["failed"] == 0
    assert r["completed"] >= 10
    assert r["sampler_rounds"] >= 1 and not r["sampler_errors"]
    assert r["sampler_split_violations"] == 0, r["violations"]
    assert r["audit_clean"], r["audit_first"]
