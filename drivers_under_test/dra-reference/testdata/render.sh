#!/bin/sh
# Regenerate the fixture machines: render library topologies with the harness's renderer, then keep
# only the sysfs files the driver reads (so the fixtures stay small). Run from this folder with the
# harness installed: sh testdata/render.sh
set -eu
for name in laptop-1s4c-smt2 server-2s8c-smt2-intel smt4-2s sparse-offline hybrid-8p8e memory-tiers-cxl; do
	tmp=$(mktemp -d)
	cci-conformance topology render "$name" --out "$tmp" >/dev/null
	rm -rf "testdata/$name"
	(cd "$tmp" && find sys/devices/system/cpu/online sys/devices/system/cpu/smt/control \
		sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id \
		sys/devices/system/cpu/cpu[0-9]*/topology/core_id \
		sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list \
		sys/devices/system/cpu/cpu[0-9]*/cache/index3/level sys/devices/system/cpu/cpu[0-9]*/cache/index3/id \
		sys/devices/system/node/node[0-9]*/cpulist sys/devices/cpu_core/cpus sys/devices/cpu_atom/cpus \
		-type f 2>/dev/null) | while read -r f; do
		mkdir -p "testdata/$name/$(dirname "$f")"
		cp "$tmp/$f" "testdata/$name/$f"
	done
	rm -rf "$tmp"
done
