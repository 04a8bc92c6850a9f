#!/usr/bin/env bash
# Installs everything gpufabric needs on a fresh Debian machine: the real fabric
# components (Open vSwitch, OpenSM, ibsim, infiniband-diags, PostgreSQL, sshd) from
# Debian, and a Python venv with the package and its dev tools. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(openvswitch-switch opensm ibsim-utils libumad2sim0 infiniband-diags iproute2
          iputils-ping postgresql openssh-server procps ovn-central ovn-host chromium)
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
stamp=.venv/.gpufabric-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  touch "$stamp"
fi
echo "setup: ok"
