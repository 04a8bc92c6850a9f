#!/usr/bin/env bash
# `make test`'s pytest step: the whole suite in two pytest processes at once, each one half of it by
# the test durations recorded in tests/durations.json: `--splits 2 --group K` is taken over by
# tests/support/split_modules.py, which gives each half WHOLE modules (heaviest first into the
# lighter half, by the summed durations of their tests; a test not yet recorded counts as the median
# test, a new module as the median module), so a module's tests run in one process in their order
# (pytest-split's own `duration_based_chunks` could cut a module in two); each half prints its
# predicted seconds and the other's. Most of the suite's time is spent waiting on real components
# (OVS, OpenSM on ibsim, PostgreSQL, namespaces, Neutron), so two processes on two cores take
# little more than half the time of one. Each process has its own basetemp and its own PostgreSQL
# cluster (tests/conftest.py); the labs' names carry a hash of their home, so two labs coexist.
# Group 2's output is printed after group 1's; the exit code is the first failure's. Extra
# arguments go to both. Re-record the durations with `make test-durations`.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
DUR=tests/durations.json
log=$(mktemp)
tmp2=$(mktemp -d)
"$BIN/pytest" -q -p no:cacheprovider --basetemp="$tmp2/t" --splits 2 --group 2 --durations-path "$DUR" "$@" >"$log" 2>&1 &
g2=$!
"$BIN/pytest" -q --splits 2 --group 1 --durations-path "$DUR" "$@"
g1=$?
wait "$g2"
r2=$?
echo "---------------- group 2 of 2 (run beside group 1): exit $r2 ----------------"
cat "$log"
rm -rf "$log" "$tmp2"
if [ "$g1" -ne 0 ]; then exit "$g1"; fi
exit "$r2"
