"""``K8sNodeDriver``: the DPU-role labels and the dpu-host taint of Kubernetes Nodes, through the
official ``kubernetes`` client.

No API server runs on the development machine: tests run it against ``kmock`` (an apiserver
emulator speaking the same REST protocol). Labels are patched key by key (``null`` deletes);
taints have no patch-merge key, so the driver reads the node, edits only the managed taints and
patches the whole list with the node's ``resourceVersion`` (a concurrent writer gets 409).

Transport: TLS verified by default (``ca_cert:`` names the API server's CA bundle when the
system's or the kubeconfig's is not the one); ``verify_ssl: false`` is accepted and reported
(:meth:`K8sNodeDriver.transport_notes` -> audit ``TRANSPORT-INSECURE``), as is an ``http://``
API server other than on loopback (``kubectl proxy`` on 127.0.0.1 stays on the host). A
``token_file`` is a secret: mode 0600 or stricter, like every secret file; so is the
``kubeconfig`` (it holds the client's token or key), unless ``insecure: true``, reported too."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gpufabric.domain.errors import ApplyError, ConfigError, FabricError
from gpufabric.fabrics.dpu.plan.profiles import DPU_LABELS, MANAGED_LABELS, MANAGED_TAINT_KEYS
from gpufabric.fabrics.dpu.state import Label, Taint
from gpufabric.transport.secrets import TransportNote, is_loopback_host, loose_note, owner_only, secret_file

SECTION_KEYS = frozenset({"host", "kubeconfig", "verify_ssl", "token_file", "ca_cert", "insecure"})


def _api_exception() -> Any:
    from kubernetes.client.exceptions import ApiException  # lazy: the client takes ~0.25 s to import

    return ApiException


def _unreachable() -> Any:
    """urllib3's base error: the API server refused, timed out or is unreachable (the client
    raises it past its retries, not as an ApiException)."""
    from urllib3.exceptions import HTTPError

    return HTTPError


class K8sNodeDriver:
    kind = "dpu"

    def __init__(self, api: Any, host: str = "", verify_ssl: bool = True, field: str = "kubernetes",
                 loose: tuple[TransportNote, ...] = ()) -> None:  # fmt: skip
        self.api, self.host, self.verify_ssl, self.field = api, host, verify_ssl, field
        self.loose = loose  # a kubeconfig others may read, accepted with insecure: true

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """TLS not verified, or plain http to another host (bearer token in clear), and a
        kubeconfig group or others may read (``insecure: true``), for the audit."""
        return self.loose + self._tls_notes()

    def _tls_notes(self) -> tuple[TransportNote, ...]:
        url = urlsplit(self.host)
        if url.scheme == "http" and not is_loopback_host(url.hostname or ""):
            return (TransportNote(self.field, "host", f"Kubernetes API at {self.host} over plain http: token in clear"),)
        if url.scheme == "https" and not self.verify_ssl:
            return (TransportNote(self.field, "verify_ssl", f"Kubernetes API at {self.host}: TLS certificate not "
                                  "verified (verify_ssl: false)"),)  # fmt: skip
        return ()

    @classmethod
    def from_section(cls, section: Any, field: str = "dpu.kubernetes") -> K8sNodeDriver:
        if not isinstance(section, Mapping):
            raise ConfigError(field, section, f"a mapping with keys {', '.join(sorted(SECTION_KEYS))}")
        for k in section:
            if k not in SECTION_KEYS:
                raise ConfigError(f"{field}.{k}", section[k], f"known keys only: {', '.join(sorted(SECTION_KEYS))}")
        from kubernetes import client, config

        insecure = section.get("insecure", False)
        if not isinstance(insecure, bool):
            raise ConfigError(f"{field}.insecure", insecure, "true or false (true: reported by the audit)")
        cfg = client.Configuration()
        loose: tuple[TransportNote, ...] = ()
        if section.get("kubeconfig"):
            kubeconfig = Path(os.path.expanduser(str(section["kubeconfig"])))
            try:
                mode = kubeconfig.stat().st_mode
            except OSError as e:
                raise ConfigError(f"{field}.kubeconfig", str(kubeconfig), "a readable file", e.strerror or str(e)) from None
            if not owner_only(f"{field}.kubeconfig", kubeconfig, mode, insecure):  # it holds credentials
                loose = (loose_note(field.removeprefix("dpu."), "kubeconfig", kubeconfig),)
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig), client_configuration=cfg)
        if section.get("host"):
            cfg.host = str(section["host"]).rstrip("/")
        if not cfg.host or cfg.host == "http://localhost":
            raise ConfigError(f"{field}.host", section.get("host"), "an API server URL or a kubeconfig")
        verify = section.get("verify_ssl", True)
        if not isinstance(verify, bool):
            raise ConfigError(f"{field}.verify_ssl", verify, "true or false (false: reported by the audit)")
        cfg.verify_ssl = verify
        if section.get("ca_cert"):
            ca = Path(os.path.expanduser(str(section["ca_cert"])))
            if not ca.is_file() or b"-----BEGIN CERTIFICATE-----" not in ca.read_bytes():
                raise ConfigError(f"{field}.ca_cert", str(ca), "a readable PEM CA bundle")
            cfg.ssl_ca_cert = str(ca.absolute())
        if section.get("token_file"):
            token = secret_file(f"{field}.token", os.path.expanduser(str(section["token_file"])))
            cfg.api_key = {"authorization": "Bearer " + token.reveal()}
        return cls(client.CoreV1Api(client.ApiClient(cfg)), host=str(cfg.host), verify_ssl=verify,
                   field=field.removeprefix("dpu."), loose=loose)

    @staticmethod
    def _managed(node: Any) -> tuple[list[Label], list[Taint]]:
        name = node.metadata.name
        labels = [Label(name, k, v or "") for k, v in (node.metadata.labels or {}).items() if k in MANAGED_LABELS]
        taints = [
            Taint(name, t.key, t.value or "", t.effect) for t in _taints(node) if t.key in MANAGED_TAINT_KEYS
        ]
        return labels, taints

    def read(self, nodes: Sequence[str] | None = None) -> tuple[frozenset[Label], frozenset[Taint]]:
        """Managed labels and taints of ``nodes`` (None: every node)."""
        try:
            if nodes is None:
                objs = list(self.api.list_node().items)
            else:
                objs = [o for o in (self._get(n) for n in nodes) if o is not None]
        except _api_exception() as e:
            raise FabricError(f"kubernetes: reading nodes failed: {e.status} {e.reason}", fabric="dpu") from None
        except _unreachable() as e:
            raise FabricError(f"kubernetes: reading nodes failed: {type(e).__name__}: {e}"[:300], fabric="dpu") from None
        labels: set[Label] = set()
        taints: set[Taint] = set()
        for o in objs:
            ls, ts = self._managed(o)
            labels.update(ls)
            taints.update(ts)
        return frozenset(labels), frozenset(taints)

    def _get(self, name: str) -> Any:
        try:
            return self.api.read_node(name)
        except _api_exception() as e:
            if e.status == 404:
                return None
            raise

    def apply(self, removes: Sequence[Label | Taint], adds: Sequence[Label | Taint]) -> tuple[frozenset[Label], frozenset[Taint]]:
        nodes = sorted({i.k8s_node for i in [*removes, *adds]})
        for name in nodes:
            self._apply_node(name, [i for i in removes if i.k8s_node == name], [i for i in adds if i.k8s_node == name])
        got_labels, got_taints = self.read(nodes)
        got: set[Label | Taint] = set(got_labels) | set(got_taints)
        wrong = [i for i in adds if i not in got] + [i for i in removes if i in got]
        if wrong:
            raise ApplyError(f"kubernetes did not take {', '.join(map(str, wrong))}", fabric="dpu")
        return got_labels, got_taints

    def _apply_node(self, name: str, removes: list[Label | Taint], adds: list[Label | Taint]) -> None:
        try:
            node = self._get(name)
            if node is None:
                if adds:
                    raise ApplyError(f"kubernetes node {name} not found", fabric="dpu", device=name)
                return  # nothing to remove from a node that is not registered
            labels: dict[str, str | None] = {i.key: None for i in removes if isinstance(i, Label)}
            labels.update({i.key: i.value for i in adds if isinstance(i, Label)})
            patch: dict[str, Any] = {"metadata": {"labels": labels}}
            if node.metadata.resource_version:  # optimistic concurrency: a concurrent writer gets 409
                patch["metadata"]["resourceVersion"] = node.metadata.resource_version
            t_rm = {(i.key, i.value, i.effect) for i in removes if isinstance(i, Taint)}
            t_add = [i.to_k8s() for i in adds if isinstance(i, Taint)]
            if t_rm or t_add:
                kept = [
                    {"key": t.key, "value": t.value, "effect": t.effect}
                    for t in _taints(node)
                    if (t.key, t.value or "", t.effect) not in t_rm
                    and (t.key, t.effect) not in {(a["key"], a["effect"]) for a in t_add}
                ]
                patch["spec"] = {"taints": kept + t_add}
            self.api.patch_node(name, patch)
        except _api_exception() as e:
            raise ApplyError(f"kubernetes: patching node {name}: {e.status} {e.reason}", fabric="dpu", device=name) from None
        except _unreachable() as e:
            raise ApplyError(f"kubernetes: patching node {name}: {type(e).__name__}: {e}"[:300], fabric="dpu", device=name) from None


class SplitK8sDriver:
    """Host nodes on one cluster, DPU nodes on another: DPU-node labels go to ``dpus``, the rest
    (host labels, taints; ``api`` for cordon/drain) to ``hosts``."""

    kind = "dpu"

    def __init__(self, hosts: Any, dpus: Any) -> None:
        self.hosts, self.dpus = hosts, dpus
        self.api = getattr(hosts, "api", None)

    @staticmethod
    def _on_dpu(i: Label | Taint) -> bool:
        return isinstance(i, Label) and i.key in DPU_LABELS

    def transport_notes(self) -> tuple[TransportNote, ...]:
        return (*self.hosts.transport_notes(), *self.dpus.transport_notes())

    def read(self, nodes: Sequence[str] | None = None) -> tuple[frozenset[Label], frozenset[Taint]]:
        hl, ht = self.hosts.read(nodes)
        dl, dt = self.dpus.read(nodes)
        return hl | dl, ht | dt

    def apply(self, removes: Sequence[Label | Taint], adds: Sequence[Label | Taint]) -> tuple[frozenset[Label], frozenset[Taint]]:
        d_rm, d_add = [i for i in removes if self._on_dpu(i)], [i for i in adds if self._on_dpu(i)]
        h_rm, h_add = [i for i in removes if not self._on_dpu(i)], [i for i in adds if not self._on_dpu(i)]
        labels: frozenset[Label] = frozenset()
        taints: frozenset[Taint] = frozenset()
        for drv, rm, add in ((self.hosts, h_rm, h_add), (self.dpus, d_rm, d_add)):
            if rm or add:
                ls, ts = drv.apply(rm, add)
                labels, taints = labels | ls, taints | ts
        return labels, taints


def _taints(node: Any) -> list[Any]:
    """A node's taints (a node may have no ``spec`` at all)."""
    return list(node.spec.taints or []) if node.spec is not None else []
