"""The DPU host driver: the managed keys of each DPU-side OVS over OVSDB (:mod:`.ovs`), the DPU's
mode and firmware through NVIDIA's tools (:mod:`.mst`), and its datapath flows and tc filters
read here or on the DPU's Arm side over SSH (:mod:`.collect`, :mod:`.sshrun`)."""
