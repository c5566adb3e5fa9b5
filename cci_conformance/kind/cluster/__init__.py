"""kind clusters: config from a topology and a node profile, lifecycle, node access, the API server, plain pods."""
