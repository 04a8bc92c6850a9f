"""The ``[ml2_gpufabric]`` options (oslo.config), registered when the driver initializes."""

from __future__ import annotations

from oslo_config import cfg

GROUP = "ml2_gpufabric"

OPTS = [
    cfg.StrOpt("url", default="https://127.0.0.1:8443", help="gpufabric API base URL (without /api/v1)."),
    cfg.StrOpt("token_file", default="/etc/neutron/gpufabric.token",
               help="File holding gpufabric's bearer token; must be mode 0600 or 0400."),
    cfg.StrOpt("ca_file", help="CA bundle to verify gpufabric's TLS certificate (default: system CAs)."),
    cfg.BoolOpt("insecure", default=False,
                help="Allow an insecure transport to gpufabric (testing only): a plain http:// url (the token "
                     "travels in clear) or https:// without verifying the certificate. Off: http:// is refused "
                     "at start; on: a TRANSPORT-INSECURE warning is logged."),
    cfg.StrOpt("node_map",
               help="JSON file {binding:host_id (the Ironic node UUID): gpufabric node name}, e.g. the esi-leap "
                    "sync's --node-map; a host id not in it is taken as the node name. Re-read when it changes."),
    cfg.ListOpt("ethernet_physnets", default=["physnet1"],
                help="Physical networks whose VLAN segments are gpufabric Ethernet VLANs: PHYSNET (on the default "
                     "instance, ethernet) or PHYSNET:INSTANCE (a gpufabric Ethernet instance of fabrics.yaml); "
                     "several physnets may share an instance."),
    cfg.ListOpt("ib_physnets", default=[],
                help="Physical networks whose VLAN segments are InfiniBand partitions, one per gpufabric IB "
                     "instance (subnet): PHYSNET:INSTANCE, e.g. ib-compute:infiniband,ib-storage:ib-storage (a "
                     "bare PHYSNET is the default instance, infiniband). The segmentation id is the subnet's fake "
                     "VLAN, mapped to a PKey by that subnet's seg-id <-> PKey mapping. Set, it replaces ib_physnet."),
    cfg.StrOpt("ib_physnet", default="ib",
               help="The one IB physnet when ib_physnets is unset, on the default instance (infiniband): the "
                    "segmentation id is gpufabric's fake VLAN, mapped to a PKey by gpufabric's seg-id <-> PKey "
                    "mapping. Empty: no IB physnet."),
    cfg.ListOpt("ironic_networks", default=[],
                help="Ironic's own networks, by Neutron name or UUID (ironic.conf [neutron] cleaning_network, "
                     "provisioning_network, rescuing_network, inspection_network): gpufabric's quarantine. A port "
                     "Ironic binds on one moves the node to quarantine on every fabric (its lease ended, verified); "
                     "these networks are never gpufabric networks."),
    cfg.StrOpt("ironic_url",
               help="Ironic's API (e.g. https://ironic:6385). Set: a tenant bind is refused while Ironic cleans "
                    "the node (provision_state cleaning, clean wait, clean hold, clean failed)."),
    cfg.StrOpt("ironic_token_file",
               help="File (0600/0400) holding a Keystone token that may read Ironic's nodes; unset: noauth."),
    cfg.StrOpt("ironic_ca_file", help="CA bundle to verify Ironic's TLS certificate (default: system CAs)."),
    cfg.FloatOpt("timeout", default=10.0, min=0.1, help="Timeout of one HTTP request to gpufabric, seconds."),
    cfg.FloatOpt("retry_for", default=30.0, min=0,
                 help="How long one call keeps retrying while gpufabric is unreachable, seconds."),
    cfg.FloatOpt("bind_timeout", default=300.0, min=0.1,
                 help="How long bind_port / unbind wait for gpufabric's move to be done, seconds; "
                      "past it the binding fails (never half-bound)."),
    cfg.FloatOpt("poll_interval", default=1.0, min=0.001, help="Interval between move status polls, seconds."),
]  # fmt: skip


def register(conf: cfg.ConfigOpts = cfg.CONF) -> cfg.ConfigOpts:
    conf.register_opts(OPTS, group=GROUP)
    return conf


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """For oslo-config-generator (entry point ``oslo.config.opts``)."""
    return [(GROUP, OPTS)]
