# SPDX-License-Identifier: BSD-3-Clause
# Shared by demo.sh and test.sh: install what the project needs, build it. Idempotent.

IMAGO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGO_LOGS="$IMAGO_ROOT/build/logs"

# Debian 12 packages: toolchain, DPDK 22.11, test and benchmark libraries, DTS needs.
IMAGO_PACKAGES=(
  build-essential meson ninja-build pkg-config
  dpdk dpdk-dev libdpdk-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsodium-dev
  python3 python3-pytest python3-scapy
  iproute2 nftables procps mount util-linux
  libzmq3-dev libnorm-dev python3-matplotlib
  clang-14 libclang-rt-14-dev
  tshark
)

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}

need_root() {
  [ "$(id -u)" = 0 ] || die "run as root (it installs packages, and the tests create network namespaces)"
}

# Install only what is missing, so a second run costs nothing.
install_packages() {
  local missing=()
  for p in "${IMAGO_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "packages: all ${#IMAGO_PACKAGES[@]} present"
    return
  fi
  say "packages: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null || die "apt-get update failed"
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null || die "apt-get install failed"
}

# build_tree DIR [meson options...]: configure once, then rebuild incrementally.
build_tree() {
  setup_tree "$@"
  build_targets "$1"
}

# setup_tree DIR [MESON_OPTION...]: configure DIR (as build_tree), build nothing.
setup_tree() {
  local dir=$1
  shift
  local log="$IMAGO_LOGS/$(basename "$dir").log"
  cd "$IMAGO_ROOT" || die "no project folder"
  # A folder without build.ninja is a half-made build: empty it (but keep build/logs).
  if [ -d "$dir" ] && [ ! -f "$dir/build.ninja" ]; then
    find "$dir" -mindepth 1 -maxdepth 1 ! -path "$IMAGO_LOGS" -exec rm -rf {} +
  fi
  mkdir -p "$IMAGO_LOGS"
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$log" 2>&1 || { tail -30 "$log"; die "meson setup $dir failed (log: $log)"; }
  elif [ $# -gt 0 ]; then
    # A tree made before its options changed (or before an option existed): take the options of now.
    meson setup --reconfigure "$dir" "$@" >"$log" 2>&1 || { tail -30 "$log"; die "meson setup --reconfigure $dir failed (log: $log)"; }
  fi
}

# build_targets DIR [TARGET...]: build those ninja targets of configured tree DIR (all of it
# without any).
build_targets() {
  local dir=$1
  shift
  local log="$IMAGO_LOGS/$(basename "$dir").log"
  say "building $dir${1:+ (${#} targets)} (log: $log)"
  ninja -C "$dir" "$@" >>"$log" 2>&1 || { grep -E 'error|FAILED' -A5 "$log" | head -60; die "build of $dir failed (log: $log)"; }
}

# setup_hugepages [N]: reserve N 2 MiB hugepages (default 512) and mount hugetlbfs on
# /dev/hugepages, for imagod and its secondary processes. Idempotent; never shrinks a
# larger reservation. Prints why and returns 1 when the kernel refuses.
setup_hugepages() {
  local want=${1:-512} have
  have=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null || echo 0)
  # In a container the host's count is shared: use what the host reserved, never change it.
  if [ "$have" -lt "$want" ] && [ -z "${IMAGO_KEEP_HOST_HUGEPAGES:-}" ]; then
    echo "$want" > /proc/sys/vm/nr_hugepages 2>/dev/null || true
  fi
  mkdir -p /dev/hugepages
  if ! mountpoint -q /dev/hugepages; then mount -t hugetlbfs nodev /dev/hugepages 2>/dev/null || true; fi
  have=$(awk '/HugePages_Total/ {print $2}' /proc/meminfo)
  if [ "${have:-0}" -lt 64 ] || ! mountpoint -q /dev/hugepages; then
    echo "hugepages: could not reserve $want 2 MiB pages or mount /dev/hugepages (have ${have:-0})"
    return 1
  fi
  say "hugepages: ${have} x 2 MiB reserved, hugetlbfs on /dev/hugepages"
}
