#!/usr/bin/env bash
# Creates .venv-neutron: a real Neutron (PyPI neutron==29.0.0, ≈ 1 min, ≈ 340 MB) with the
# gpufabric ML2 driver (integrations/neutron) installed editable, for the driver's unit tests
# and the real-Neutron integration test. Separate from .venv: Neutron is heavy and pins its
# own dependencies; the driver talks to gpufabric over HTTP and never imports it. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
NEUTRON_VERSION=29.0.0
V=${NEUTRON_VENV:-.venv-neutron}
PY=${PYTHON:-python3}
stamp="$V/.gpufabric-neutron-$NEUTRON_VERSION"
if [ -f "$stamp" ] && [ ! integrations/neutron/pyproject.toml -nt "$stamp" ]; then
  echo "neutron-venv: ok ($V)"; exit 0
fi
start=$(date +%s)
[ -x "$V/bin/python" ] || "$PY" -m venv "$V"
quiet() { "$@" 2> >(grep -v "is ignored: it is neither" >&2); }
quiet "$V/bin/pip" install -q --upgrade pip
quiet "$V/bin/pip" install -q "neutron==$NEUTRON_VERSION" pytest
quiet "$V/bin/pip" install -q -e integrations/neutron
touch "$stamp"
echo "neutron-venv: installed neutron $NEUTRON_VERSION into $V in $(( $(date +%s) - start ))s"
