#!/bin/sh
# Install and start Docker for the kind backend on hosts without systemd, whose
# capability bounding set may lack capabilities that --privileged asks for.
# Idempotent: safe to run again; it starts dockerd only if it is not answering.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
wrapper=/usr/local/sbin/oci-capfilter
daemon_json=/etc/docker/daemon.json
log=${DOCKERD_LOG:-/var/log/dockerd.log}

if ! command -v dockerd >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq docker.io >/dev/null
fi

install -m 0755 "$here/oci-capfilter" "$wrapper"

mkdir -p /etc/docker
if [ -f "$daemon_json" ] && ! grep -q oci-capfilter "$daemon_json"; then
    echo "docker-setup: $daemon_json exists and does not use oci-capfilter;" \
         "add the runtime by hand (see tools/docker-setup/README.md)" >&2
    exit 2
fi
cat > "$daemon_json" <<JSON
{
  "runtimes": {"capfilter": {"path": "$wrapper"}},
  "default-runtime": "capfilter"
}
JSON

# Every kind node runs systemd, which takes inotify instances; the kernel default (128 per user) runs out
# at about four nodes, and a node that cannot start systemd never logs "Reached target Multi-User System"
# (kind's known issue "Pod errors due to too many open files"). Raised here, once, as kind's docs advise.
for pair in fs.inotify.max_user_instances=512 fs.inotify.max_user_watches=524288; do
    key=${pair%%=*}; want=${pair#*=}
    have=$(sysctl -n "$key" 2>/dev/null || echo 0)
    if [ "$have" -lt "$want" ]; then
        sysctl -w "$pair" >/dev/null 2>&1 || echo "docker-setup: could not raise $key to $want (kind may fail with more nodes)" >&2
    fi
done

if docker info >/dev/null 2>&1; then
    # dockerd reads daemon.json at start; a running daemon started without it
    # must be restarted by whoever started it.
    if ! docker info --format '{{.DefaultRuntime}}' | grep -qx capfilter; then
        echo "docker-setup: dockerd is running without the capfilter default runtime;" \
             "stop it and run this script again" >&2
        exit 2
    fi
    echo "docker-setup: dockerd already running with capfilter"
    exit 0
fi

# Start dockerd detached from this shell so it outlives the caller.
setsid dockerd >>"$log" 2>&1 < /dev/null &
i=0
until docker info >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -gt 60 ]; then
        echo "docker-setup: dockerd did not answer within 30 s; see $log" >&2
        exit 1
    fi
    sleep 0.5
done
echo "docker-setup: dockerd started (log: $log)"
