#!/usr/bin/env bash
# Creates .venv-ironic: a real Ironic (PyPI ironic==39.0.0) for the lab's and the integration
# tests' Ironic (API + conductor in one `ironic` process, noauth, SQLite, fake-hardware):
# tests/integration/ironic_env.py starts it. Own venv: Ironic pins its own oslo/SQLAlchemy set,
# which does not resolve together with esi-leap 1.0.0. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
IRONIC_VERSION=39.0.0
V=${IRONIC_VENV:-.venv-ironic}
PY=${PYTHON:-python3}
stamp="$V/.gpufabric-ironic-$IRONIC_VERSION"
if [ -f "$stamp" ]; then
  echo "ironic-venv: ok ($V)"; exit 0
fi
start=$(date +%s)
[ -x "$V/bin/python" ] || "$PY" -m venv "$V"
quiet() { "$@" 2> >(grep -v "is ignored: it is neither" >&2); }
quiet "$V/bin/pip" install -q --upgrade pip
quiet "$V/bin/pip" install -q "ironic==$IRONIC_VERSION"
touch "$stamp"
echo "ironic-venv: installed ironic $IRONIC_VERSION into $V in $(( $(date +%s) - start ))s"
