"""/proc/cpuinfo text for a Topology, consistent with its sysfs tree (cAdvisor counts sockets from it)."""

from __future__ import annotations

from pathlib import Path

from .model import Topology

VENDOR_IDS = {"intel": "GenuineIntel", "amd": "AuthenticAMD"}
_DEFAULT_MODEL = {
    "intel": ("6", "143", "Intel(R) Xeon(R) Platinum 8480+"),
    "amd": ("25", "17", "AMD EPYC 9654 96-Core Processor"),
}
_BASE_FLAGS = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse "
               "sse2{ht} syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid pni "
               "pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm "
               "abm fsgsbase bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap clflushopt clwb")


def _bits(n: int) -> int:
    return max(0, (n - 1).bit_length())


def cpuinfo_text(t: Topology) -> str:
    vendor = t.vendor or "intel"
    family, model, default_name = _DEFAULT_MODEL.get(vendor, _DEFAULT_MODEL["intel"])
    name = t.model_name or default_name
    flags = _BASE_FLAGS.format(ht=" ht" if t.threads_per_core > 1 else "")
    # APIC ids as x86 lays them out: package | core index within the package | thread index.
    cores_in_package: dict[int, list[frozenset[int]]] = {}
    for core in t.cores:
        cores_in_package.setdefault(t.by_id[min(core)].package, []).append(core)
    thread_bits = _bits(t.threads_per_core)
    core_bits = _bits(max((len(v) for v in cores_in_package.values()), default=1))
    apicid: dict[int, int] = {}
    for package, cores in cores_in_package.items():
        for index, core in enumerate(cores):
            for thread, cpu in enumerate(sorted(core)):
                apicid[cpu] = (package << (core_bits + thread_bits)) | (index << thread_bits) | thread
    blocks = []
    for c in t.cpus:
        package_cpus = t.packages[c.package]
        blocks.append(
            f"processor\t: {c.id}\n"
            f"vendor_id\t: {VENDOR_IDS.get(vendor, 'GenuineIntel')}\n"
            f"cpu family\t: {family}\n"
            f"model\t\t: {model}\n"
            f"model name\t: {name}\n"
            f"stepping\t: 1\n"
            f"cpu MHz\t\t: 2000.000\n"
            f"physical id\t: {c.package}\n"
            f"siblings\t: {len(package_cpus)}\n"
            f"core id\t\t: {c.core}\n"
            f"cpu cores\t: {len(cores_in_package.get(c.package, ()))}\n"
            f"apicid\t\t: {apicid[c.id]}\n"
            f"initial apicid\t: {apicid[c.id]}\n"
            f"fpu\t\t: yes\n"
            f"flags\t\t: {flags}\n"
            f"clflush size\t: 64\n"
            f"cache_alignment\t: 64\n"
            f"address sizes\t: 46 bits physical, 57 bits virtual\n"
            f"power management:\n\n"
        )
    return "".join(blocks)


def read_vendor(cpuinfo: Path) -> tuple[str, str]:
    """(vendor, model name) from the first processor block of a cpuinfo file; ("", "") when unreadable."""
    vendor = model_name = ""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            head = f.read(8192)
    except OSError:
        return "", ""
    for line in head.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "vendor_id":
            vendor = next((k for k, v in VENDOR_IDS.items() if v == value), "")
        elif key == "model name":
            model_name = value
    return vendor, model_name
