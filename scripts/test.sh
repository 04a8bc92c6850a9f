#!/usr/bin/env bash
# `make test`'s pytest step: the whole suite in two pytest processes at once. tests/unit (pure,
# in-process, CPU-bound: about 5 of the suite's ~38 minutes) runs beside the rest, whose time is
# mostly spent waiting on real components (OVS, OpenSM on ibsim, PostgreSQL, namespaces), so the
# second core does the unit tests while the first waits. Each process has its own basetemp and
# its own PostgreSQL cluster (tests/conftest.py). The unit run's output is printed after the rest;
# the exit code is the first failure's. Extra arguments go to both.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
log=$(mktemp)
unit_tmp=$(mktemp -d)
"$BIN/pytest" -q -p no:cacheprovider --basetemp="$unit_tmp/t" tests/unit "$@" >"$log" 2>&1 &
unit=$!
"$BIN/pytest" -q --ignore=tests/unit "$@"
rest=$?
wait "$unit"
u=$?
echo "---------------- tests/unit (run beside the rest): exit $u ----------------"
cat "$log"
rm -rf "$log" "$unit_tmp"
if [ "$rest" -ne 0 ]; then exit "$rest"; fi
exit "$u"
