#!/usr/bin/env bash
# A root for qemu-aarch64 (`qemu-aarch64 -L ROOT`): LIBDIR's arm64 libraries as its /lib, and
# the /proc/cpuinfo and /sys CPU lists of a 2-core Graviton2 (Neoverse N1, as Lambda's arm64
# functions see) in place of the x86 host's, which qemu-user would otherwise show: ONNX
# Runtime's CPU detection (cpuinfo) reads them while it loads, and on the host's x86 topology
# it dies (SIGSEGV) before any call. qemu-user looks every absolute path up under -L first.
#
#   bash scripts/ci/arm64_guest.sh ROOT LIBDIR   (arm64_libs_check.sh and arm64_build.sh run it)
set -euo pipefail
root=${1:?usage: arm64_guest.sh ROOT LIBDIR} lib=${2:?usage: arm64_guest.sh ROOT LIBDIR}
mkdir -p "$root/proc" "$root/sys/devices/system/cpu"
ln -sfn "$lib" "$root/lib"
for i in 0 1; do
  printf 'processor\t: %s\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n' "$i"
done > "$root/proc/cpuinfo"
for f in possible present online; do echo 0-1 > "$root/sys/devices/system/cpu/$f"; done
