#!/usr/bin/env bash
# Creates .venv-esiclient: the user's own client, python-esiclient==1.3.0 from PyPI (it brings
# python-openstackclient and python-ironicclient: `openstack baremetal ...`, `openstack esi ...`),
# used by the integration tests to create Ironic's nodes and ports as an operator would. Own
# venv: it pins its own openstacksdk. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
ESICLIENT_VERSION=1.3.0
V=${ESICLIENT_VENV:-.venv-esiclient}
PY=${PYTHON:-python3}
stamp="$V/.gpufabric-esiclient-$ESICLIENT_VERSION"
if [ -f "$stamp" ]; then
  echo "esiclient-venv: ok ($V)"; exit 0
fi
start=$(date +%s)
[ -x "$V/bin/python" ] || "$PY" -m venv "$V"
quiet() { "$@" 2> >(grep -v "is ignored: it is neither" >&2); }
quiet "$V/bin/pip" install -q --upgrade pip
quiet "$V/bin/pip" install -q "python-esiclient==$ESICLIENT_VERSION"
touch "$stamp"
echo "esiclient-venv: installed python-esiclient $ESICLIENT_VERSION into $V in $(( $(date +%s) - start ))s"
