"""Text files of the node image: containerd and crictl config, kind's version file and manifests."""

from __future__ import annotations

PAUSE_REFERENCE_KEY = "pause"

CRICTL_YAML = (
    "runtime-endpoint: unix:///run/containerd/containerd.sock\n"
    "image-endpoint: unix:///run/containerd/containerd.sock\n"
    "timeout: 30\n"
)


def containerd_config(pause_image: str) -> str:
    """containerd 2.x config (schema version 3): CRI with the systemd cgroup driver, NRI on.

    runc is reached through the cpuset recorder (see assets/cpuset-recorder.go); the sandbox image is
    the pause image imported at build time, so containerd never tries to pull it.
    """
    return f"""version = 3

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '{pause_image}'

[plugins.'io.containerd.cri.v1.runtime']
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = true
        BinaryName = '/usr/local/sbin/cpuset-recorder'
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = '/etc/cni/net.d'

[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = '/var/run/nri/nri.sock'
  plugin_path = '/opt/nri/plugins'
  plugin_config_path = '/etc/nri/conf.d'
"""


# kind applies these two manifests while creating a cluster. Pod networking comes from the node-local
# bridge written at boot (assets/node-cni.sh), and there is no dynamic storage provisioner offline, so
# both manifests only leave a note in the cluster for whoever looks.
DEFAULT_CNI_MANIFEST = """apiVersion: v1
kind: ConfigMap
metadata:
  name: cci-conformance-network
  namespace: kube-system
data:
  note: "Pod networking is a node-local bridge written at node boot; pods on different nodes cannot reach each other."
"""

DEFAULT_STORAGE_MANIFEST = """apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
"""
