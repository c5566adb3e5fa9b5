"""The cluster backend: the suites on the real nodes of an existing cluster, reached through its kubeconfig."""
