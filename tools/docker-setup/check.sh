#!/bin/sh
# Check that privileged containers and docker exec into them work (what kind needs).
# Builds a throw-away image from the host's static busybox (apt: busybox-static).
set -eu
busybox=$(command -v busybox || true)
if [ -z "$busybox" ] || ! file -L "$busybox" 2>/dev/null | grep -q static; then
    busybox=/bin/busybox
fi
[ -x "$busybox" ] || { echo "check: install busybox-static first" >&2; exit 2; }

image=cci-docker-setup-check:latest
name=cci-docker-setup-check-$$
work=$(mktemp -d)
cleanup() {
    docker rm -f "$name" >/dev/null 2>&1 || true
    docker rmi -f "$image" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

mkdir -p "$work/bin"
cp "$busybox" "$work/bin/busybox"
ln -s busybox "$work/bin/sh"
ln -s busybox "$work/bin/sleep"
tar -C "$work" -c bin | docker import -c 'CMD ["/bin/sleep","300"]' - "$image" >/dev/null

docker run -d --privileged --name "$name" "$image" >/dev/null
out=$(docker exec "$name" /bin/busybox cat /proc/self/status | grep CapEff)
echo "check: privileged container and docker exec work ($out)"
