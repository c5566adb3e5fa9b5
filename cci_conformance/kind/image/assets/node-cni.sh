#!/bin/sh
# Write a node-local bridge CNI config unless one was mounted in. The pod subnet is derived from the
# node's own IPv4 address (10.244.<last octet>.0/24), so nodes on one docker network never overlap.
# Pods reach their own node and the outside; there are no routes between nodes' pod subnets.
set -eu
dir=/etc/cni/net.d
mkdir -p "$dir"
if ls "$dir"/*.conflist >/dev/null 2>&1 || ls "$dir"/*.conf >/dev/null 2>&1; then
    exit 0
fi
addr=$(ip -4 -o addr show scope global | awk '{print $4}' | head -n1)
octet=$(echo "${addr%/*}" | awk -F. '{print $4}')
[ -n "$octet" ] || { echo "node-cni: no global IPv4 address" >&2; exit 1; }
cat > "$dir/10-cci-bridge.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "cci-bridge",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.$octet.0/24"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
