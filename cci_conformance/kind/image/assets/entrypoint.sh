#!/bin/sh
# Node entrypoint: prepare what kubeadm, the kubelet and containerd expect of a kind node, then boot systemd.
set -eu

# The kubelet's mount propagation (HostToContainer/Bidirectional volumes) needs a shared root.
mount --make-rshared /

# The kubelet wants these kernel sysctls and, with protectKernelDefaults: false, writes them.
# They are not namespaced: writing them changes the host (kernel.panic_on_oops=1 would make the
# host panic on any oops). Show the kubelet read-only files with the values it expects instead,
# so it never writes; the node's kubelet also runs with protectKernelDefaults: true.
fake_dir=/run/cci-sysctl
mkdir -p "$fake_dir"
for pair in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
            kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
    key=${pair%%=*}
    want=${pair#*=}
    target=/proc/sys/$key
    [ -e "$target" ] || continue
    if [ "$(cat "$target")" != "$want" ]; then
        file=$fake_dir/$(echo "$key" | tr / .)
        echo "$want" > "$file"
        mount --bind "$file" "$target"
        mount -o remount,bind,ro "$target"
    fi
done

# cgroup v1: kind's kubelet runs with cgroupRoot /kubelet (kubelet.slice with the systemd driver) and
# refuses to start unless that cgroup exists in every hierarchy; a v1 cpuset child starts empty, so it
# gets the node's CPUs and memory nodes.
if [ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]; then
    for hierarchy in /sys/fs/cgroup/*/; do
        [ -L "${hierarchy%/}" ] && continue
        [ -f "${hierarchy}cgroup.procs" ] || continue
        for dir in kubelet kubelet.slice; do
            mkdir -p "$hierarchy$dir"
            if [ -f "${hierarchy}cpuset.cpus" ]; then
                cat "${hierarchy}cpuset.cpus" > "$hierarchy$dir/cpuset.cpus"
                cat "${hierarchy}cpuset.mems" > "$hierarchy$dir/cpuset.mems"
            fi
        done
    done
fi

# Docker's embedded DNS (127.0.0.11 in /etc/resolv.conf) is reachable only from the node's own network
# namespace. Pods get the node's resolv.conf (CoreDNS forwards to it), and 127.0.0.11 in a pod is the pod
# itself: CoreDNS would detect a loop and exit. Point resolv.conf at the node's address instead and
# forward DNS arriving there (from pods or the node) to the embedded server's real ports.
if grep -q '^nameserver 127.0.0.11' /etc/resolv.conf 2>/dev/null; then
    node_ip=$(ip -4 -o addr show scope global | awk '{print $4}' | head -n1)
    node_ip=${node_ip%/*}
    rules=$(iptables-save -t nat 2>/dev/null || true)
    udp=$(echo "$rules" | sed -n 's|.*-d 127.0.0.11/32 -p udp .*--to-destination 127.0.0.11:\([0-9]*\).*|\1|p' | head -n1)
    tcp=$(echo "$rules" | sed -n 's|.*-d 127.0.0.11/32 -p tcp .*--to-destination 127.0.0.11:\([0-9]*\).*|\1|p' | head -n1)
    if [ -n "$node_ip" ] && [ -n "$udp" ] && [ -n "$tcp" ]; then
        echo 1 > /proc/sys/net/ipv4/conf/all/route_localnet
        for chain in PREROUTING OUTPUT; do
            iptables -t nat -I "$chain" -d "$node_ip" -p udp --dport 53 -j DNAT --to-destination "127.0.0.11:$udp"
            iptables -t nat -I "$chain" -d "$node_ip" -p tcp --dport 53 -j DNAT --to-destination "127.0.0.11:$tcp"
        done
        # /etc/resolv.conf is a bind mount made by docker: rewrite it in place.
        sed "s/^nameserver 127.0.0.11/nameserver $node_ip/" /etc/resolv.conf > /run/cci-resolv.conf
        cat /run/cci-resolv.conf > /etc/resolv.conf
    fi
fi

exec "$@"
