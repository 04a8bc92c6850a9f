#!/usr/bin/env bash
# Creates .venv-esi-leap: esi-leap 1.0.0 from PyPI (it pins SQLAlchemy 1.4 and openstacksdk 1.2,
# so it gets its own venv; ≈ 80 s, ≈ 380 MB) plus the gpufabric lease mirror
# (integrations/neutron, package gpufabric_neutron: `gpufabric-esi-leap-sync`). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
ESI_LEAP_VERSION=1.0.0
V=${ESI_LEAP_VENV:-.venv-esi-leap}
PY=${PYTHON:-python3}
stamp="$V/.gpufabric-esi-leap-$ESI_LEAP_VERSION"
if [ -f "$stamp" ] && [ ! integrations/neutron/pyproject.toml -nt "$stamp" ]; then
  echo "esi-leap-venv: ok ($V)"; exit 0
fi
start=$(date +%s)
[ -x "$V/bin/python" ] || "$PY" -m venv "$V"
quiet() { "$@" 2> >(grep -v "is ignored: it is neither" >&2); }
quiet "$V/bin/pip" install -q --upgrade pip
quiet "$V/bin/pip" install -q "esi-leap==$ESI_LEAP_VERSION"
quiet "$V/bin/pip" install -q --no-deps -e integrations/neutron
touch "$stamp"
echo "esi-leap-venv: installed esi-leap $ESI_LEAP_VERSION into $V in $(( $(date +%s) - start ))s"
