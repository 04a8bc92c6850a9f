#!/usr/bin/env bash
# Installs everything gpufabric needs on a fresh Debian machine: the real fabric
# components (Open vSwitch, OpenSM, ibsim, infiniband-diags, PostgreSQL, sshd) from
# Debian, and a Python venv with the package and its dev tools. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(openvswitch-switch opensm ibsim-utils libumad2sim0 infiniband-diags iproute2
          iputils-ping postgresql openssh-server procps ovn-central ovn-host chromium python3-openvswitch)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
# a venv that lost its python or its pip (e.g. made with --without-pip) is rebuilt from scratch
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  rm -rf .venv
  "$PY" -m venv .venv
fi
# the stamp holds pyproject.toml's digest: a changed file (its entry points: a kind's or a
# driver's module moved) reinstalls, whatever the two files' mtimes say
stamp=.venv/.gpufabric-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  echo "$want" > "$stamp"
fi
# PyPI's python-ovs is pure Python; Debian's python3-openvswitch ships its C JSON parser
# (the first OVSDB read of a 32-bridge lab: ~1.4 s -> ~0.5 s). Use it when it matches the
# venv's Python ABI; drop it again if the venv's ovs cannot import it.
ext=$(.venv/bin/python -c 'import sysconfig; print("_json" + sysconfig.get_config_var("EXT_SUFFIX"))')
ovsdir=$(.venv/bin/python -c 'import os, ovs; print(os.path.dirname(ovs.__file__))')
if [ -f "/usr/lib/python3/dist-packages/ovs/$ext" ] && [ ! -e "$ovsdir/$ext" ]; then
  ln -s "/usr/lib/python3/dist-packages/ovs/$ext" "$ovsdir/$ext"
  .venv/bin/python -c 'import ovs.json; assert ovs.json.PARSER == "C"' 2>/dev/null || rm -f "$ovsdir/$ext"
fi
echo "setup: ok"
