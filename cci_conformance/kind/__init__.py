"""The kind backend's foundation: offline node-image build, cluster lifecycle and node access."""
