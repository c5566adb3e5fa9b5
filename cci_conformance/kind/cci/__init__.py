"""The CCI driver on the patched kubelet: the run's cluster, what it deploys, and the NodeSession over a worker."""
