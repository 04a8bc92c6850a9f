#!/usr/bin/env bash
# `make demo`: the main job end to end on the embedded default (SQLite + the local lab).
# Brings up a fresh lab (ibsim + OpenSM + OVS + namespaces, a stand-in Fabric Manager per node,
# two DPUs on a real OVN), registers it, creates two tenants with networks, leases nodes (with
# GPU partitions), moves one between tenants and offerings over all four fabrics, audits, and
# ends with the table of the lab's nodes and their ports on every fabric.
set -euo pipefail
cd "$(dirname "$0")/.."
# The demo has its own state dir (it starts from scratch there), never the default one.
export GPUFABRIC_HOME=${DEMO_HOME:-$PWD/.gpufabric/demo}
GF=.venv/bin/gpufabric
say() { printf '\n\033[1;36m== %s\033[0m\n' "$*"; }

say "fresh lab in $GPUFABRIC_HOME"
$GF lab down >/dev/null 2>&1 || true
rm -rf "$GPUFABRIC_HOME"
# gpu-a02's two NICs are one LACP bond on its leaf (its own OVS bridge, as a bonded server has)
BONDED=${DEMO_BONDED-gpu-a02}
$GF lab up --nodes ${DEMO_NODES:-6} --hcas-per-node 2 --dpus ${DEMO_DPUS:-2} ${BONDED:+--bonded "$BONDED"}

say "tenants and their networks (VLAN + PKey through the segmentation-id mapping)"
$GF tenant create alpha
$GF tenant create beta
$GF network create alpha-net --tenant alpha
$GF network create beta-net --tenant beta

say "lease gpu-a01 to alpha (openshift: its DPU runs OVN-K in dpu mode), 4 GPUs of gpu-a02 to alpha, gpu-a03 to beta"
$GF lease create --tenant alpha --node gpu-a01 --offering openshift
$GF lease create --tenant alpha --node gpu-a02 --offering openshift --gpus 4
$GF lease create --tenant beta --node gpu-a03 --offering openstack

say "plan of moving gpu-a02 from alpha to beta (dry run): removals first, on every fabric"
$GF node move gpu-a02 --to-tenant beta --offering openshift --dry-run

say "move gpu-a02 (bonded: the VLAN goes on its leaf's bond, not the members): alpha -> quarantine -> beta, verified on OVS, by SMP reads, fmpm -l, OVN and Kubernetes"
$GF node move gpu-a02 --to-tenant beta --offering openshift

say "audit: isolation proven from the fabrics' real state"
$GF audit || true

say "which flows run in NIC hardware (the userspace datapath keeps them all in software)"
$GF offload report || true

say "leases"
$GF lease list

echo
echo "The lab stays up to explore: GPUFABRIC_HOME=$GPUFABRIC_HOME $GF --help   (stop it: make lab-down)"

say "the lab's nodes, their Ethernet ports and IB GUIDs"
$GF node list
