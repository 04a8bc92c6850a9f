#!/usr/bin/env bash
# Creates the OpenStack venvs, one per service, from PyPI: `openstack-venv.sh [NAME...]` (no NAME:
# all four, in parallel; several: in parallel, exit 1 if any failed). Each service pins its own
# oslo/SQLAlchemy/openstacksdk set, which do not resolve together, hence one venv each; the
# gpufabric side talks to them over HTTP or runs their python as a subprocess, never imports them.
#   neutron    .venv-neutron    a real Neutron (≈ 1 min, ≈ 340 MB) with the gpufabric ML2 driver
#              (integrations/neutron, editable) and pytest, for the driver's unit tests and the
#              real-Neutron integration tests (tests/integration/neutron_env.py).
#   esi-leap   .venv-esi-leap   esi-leap (SQLAlchemy 1.4, openstacksdk 1.2; ≈ 80 s, ≈ 380 MB) plus
#              the lease mirror (integrations/neutron, gpufabric_neutron: `gpufabric-esi-leap-sync`).
#   ironic     .venv-ironic     a real Ironic (API + conductor in one `ironic` process, noauth,
#              SQLite, fake-hardware) for the lab's and the integration tests' Ironic
#              (tests/integration/ironic_env.py starts it).
#   esiclient  .venv-esiclient  the user's own client, python-esiclient (python-openstackclient and
#              python-ironicclient: `openstack baremetal ...`, `openstack esi ...`), with which the
#              integration tests create Ironic's nodes and ports as an operator would.
# A venv's path: $NEUTRON_VENV, $ESI_LEAP_VENV, $IRONIC_VENV, $ESICLIENT_VENV, else the one above.
# Idempotent: a stamp .gpufabric-NAME-VERSION in the venv (VERSION: the first requirement's pin);
# a venv with the local package is rebuilt when integrations/neutron/pyproject.toml is newer.
set -euo pipefail
cd "$(dirname "$0")/.."
NAMES=(neutron esi-leap ironic esiclient)

# NAME -> REQS (PyPI requirements, the first one pinned ==) and LOCAL (pip arguments installing
# the local package after them; empty: none).
spec() {
  LOCAL=""
  case $1 in
    neutron)   REQS="neutron==29.0.0 pytest";  LOCAL="-e integrations/neutron" ;;
    esi-leap)  REQS="esi-leap==1.0.0";         LOCAL="--no-deps -e integrations/neutron" ;;
    ironic)    REQS="ironic==39.0.0" ;;
    esiclient) REQS="python-esiclient==1.3.0" ;;
    *) echo "openstack-venv: unknown venv '$1' (known: ${NAMES[*]})" >&2; return 2 ;;
  esac
}

build() {
  local name=$1 var V PY stamp first version start
  spec "$name" || return
  var="$(echo "$name" | tr 'a-z-' 'A-Z_')_VENV"
  V=${!var:-.venv-$name}
  PY=${PYTHON:-python3}
  first=${REQS%% *}
  version=${first##*==}
  stamp="$V/.gpufabric-$name-$version"
  if [ -f "$stamp" ] && { [ -z "$LOCAL" ] || [ ! integrations/neutron/pyproject.toml -nt "$stamp" ]; }; then
    echo "$name-venv: ok ($V)"; return 0
  fi
  start=$(date +%s)
  [ -x "$V/bin/python" ] || "$PY" -m venv "$V"
  quiet() { "$@" 2> >(grep -v "is ignored: it is neither" >&2); }
  # shellcheck disable=SC2086  # REQS and LOCAL are word lists
  quiet "$V/bin/pip" install -q --upgrade pip &&
    quiet "$V/bin/pip" install -q $REQS &&
    { [ -z "$LOCAL" ] || quiet "$V/bin/pip" install -q $LOCAL; } || return
  touch "$stamp"
  echo "$name-venv: installed $first into $V in $(( $(date +%s) - start ))s"
}

[ $# -gt 0 ] || set -- "${NAMES[@]}"
if [ $# -eq 1 ]; then
  build "$1"; exit
fi
pids=()
for name in "$@"; do
  build "$name" & pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
  wait "$p" || rc=1
done
exit $rc
