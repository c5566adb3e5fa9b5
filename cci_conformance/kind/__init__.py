"""Real kubelets in kind: node image build (image/), clusters (cluster/), the CCI backend session (cci/)."""
