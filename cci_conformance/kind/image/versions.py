"""Pinned versions of everything the offline node images are built from; the build cache is keyed by them."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError


@dataclass(frozen=True)
class Release:
    """One Kubernetes release the node image can be built for, with the tools that must move with it."""

    kubernetes: str
    # kind writes the kubeadm config for the node's release: v1beta3 up to 1.35, v1beta4 from 1.36
    # (kind pkg/cluster/internal/kubeadm/config.go); kubeadm 1.37 reads only v1beta4 and v1.
    kind: str
    kubeadm_api: str
    containerd: str
    crictl: str
    # etcd and CoreDNS follow what this release's kubeadm asks for (`kubeadm config images list`,
    # cmd/kubeadm/app/constants: DefaultEtcdVersion, CoreDNSVersion).
    etcd: str
    coredns: str
    # True: the kubelet carries KEP-3675's CCI manager (kubelet-cci/); False: the release's own kubelet.
    cci_kubelet: bool

    @property
    def staging(self) -> str:
        """The published k8s.io/* staging modules carry v0.<minor>.<patch> of the same release."""
        return "v0." + self.kubernetes.lstrip("v").split(".", 1)[1]

    @property
    def minor(self) -> int:
        return int(self.kubernetes.lstrip("v").split(".")[1])

    @property
    def refuses_cgroup_v1(self) -> bool:
        """1.35 made the kubelet's failCgroupV1 default to true (KEP-5573): on a cgroup v1 host it exits
        unless the KubeletConfiguration sets it false."""
        return self.minor >= 35


# Kubernetes 1.34 is the newest minor whose kubelet still runs on cgroup v1 hosts by default; the CCI
# patch (kubelet-cci/patches) is written against it.
CCI = Release(kubernetes="v1.34.12", kind="v0.30.0", kubeadm_api="kubeadm.k8s.io/v1beta3",
              containerd="v2.2.9", crictl="v1.34.0", etcd="v3.6.5", coredns="v1.12.1", cci_kubelet=True)
# The current release line, unpatched, for DRA drivers (KEP-5517 and the DRA features they use are 1.36+).
VANILLA = Release(kubernetes="v1.37.2", kind="v0.33.0", kubeadm_api="kubeadm.k8s.io/v1beta4",
                  containerd="v2.2.9", crictl="v1.37.0", etcd="v3.7.0", coredns="v1.14.6", cci_kubelet=False)
# The release before it, so that the DRA findings have a column per release (docs/dra-cpu.md): the oldest one
# whose DRA features the suites use are all on by default (DRAConsumableCapacity went beta in 1.36). Its pins from
# its kubeadm (constants.go: etcd 3.6.8-0, CoreDNS v1.14.2); crictl of the same minor.
PREVIOUS = Release(kubernetes="v1.36.3", kind="v0.33.0", kubeadm_api="kubeadm.k8s.io/v1beta4",
                   containerd="v2.2.9", crictl="v1.36.0", etcd="v3.6.8", coredns="v1.14.2", cci_kubelet=False)
RELEASES = {r.kubernetes: r for r in (CCI, PREVIOUS, VANILLA)}


def release(kubernetes: str, field: str = "--kubernetes") -> Release:
    """The release of that version; anything else is a ConfigError naming the versions the harness builds."""
    version = kubernetes if kubernetes.startswith("v") else "v" + kubernetes
    if version not in RELEASES:
        raise ConfigError(f"Kubernetes {kubernetes} is not a release the node image is built for", field=field,
                          fix=f"use one of {', '.join(sorted(RELEASES))}")
    return RELEASES[version]


# The CCI release's pins under their old names (the CCI backend and its tests read these).
KUBERNETES = CCI.kubernetes
KUBERNETES_STAGING = CCI.staging
KIND = CCI.kind
CONTAINERD = CCI.containerd
CRICTL = CCI.crictl
ETCD = CCI.etcd
COREDNS = CCI.coredns
# Debian release of the node rootfs (runc and the CNI plugins come from its packages).
DEBIAN_SUITE = "bookworm"
