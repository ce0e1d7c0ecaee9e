#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Run the README's test command (scripts/test.sh) inside a container, as CI in a container
# with virtual devices would:
#
#   scripts/container-test.sh [--keep]
#
# 1. installs podman, runc and mmdebstrap on this host (Debian packages);
# 2. makes a Debian bookworm root file system with mmdebstrap and imports it as the image
#    localhost/imago-base:bookworm (kept in build-container/, made once);
# 3. builds localhost/imago-ci from tools/container/Containerfile (the test command's
#    packages installed);
# 4. copies a clean checkout of HEAD (git archive: what CI would clone) into a fresh
#    container and runs ./scripts/test.sh there, privileged (network namespaces, hugetlbfs
#    mounts), with this host's hugepages: reserved here first, never changed from inside
#    (the host's nr_hugepages is shared; IMAGO_KEEP_HOST_HUGEPAGES tells lib.sh).
#
# Podman runs with runc and explicit ulimits (CONTAINERS_CONF=tools/container/containers.conf):
# Debian's default crun fails on this kind of VM (setrlimit refused, hybrid cgroups).
# Prints the wall time of each step; exits with the test command's status. --keep keeps the
# container for a look afterwards (podman start -ai imago-ci-run).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
need_root
keep=0
[ "${1:-}" = --keep ] && keep=1
case ${1:-} in -h | --help)
  sed -n '3,22p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
  ;;
esac

export CONTAINERS_CONF="$IMAGO_ROOT/tools/container/containers.conf"
work="$IMAGO_ROOT/build-container"
mkdir -p "$work"
t0=$(date +%s)
step() { say "$1 ($(($(date +%s) - t0)) s so far)"; }

step "container: host packages"
for p in podman runc mmdebstrap uidmap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ -n "${missing[*]:-}" ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
    die "apt-get install ${missing[*]} failed"
fi

step "container: base image"
if ! podman image exists localhost/imago-base:bookworm; then
  rm -f "$work/rootfs.tar"
  mmdebstrap --variant=apt --quiet bookworm "$work/rootfs.tar" \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main" || die "mmdebstrap failed"
  podman import "$work/rootfs.tar" localhost/imago-base:bookworm >/dev/null || die "podman import failed"
fi

step "container: CI image"
ctx="$work/context"  # only what the image needs, not the whole tree with its builds
rm -rf "$ctx" && mkdir -p "$ctx/scripts" && cp "$IMAGO_ROOT/scripts/lib.sh" "$ctx/scripts/"
podman build -q -f "$IMAGO_ROOT/tools/container/Containerfile" -t localhost/imago-ci "$ctx" >/dev/null ||
  die "podman build failed"

step "container: hugepages on the host"
setup_hugepages 512 || die "this host cannot reserve hugepages: the container's secondaries need them"

step "container: the test command in a fresh container"
src="$work/src"
rm -rf "$src" && mkdir -p "$src"
git -C "$IMAGO_ROOT" archive HEAD | tar -x -C "$src" || die "git archive failed"
podman rm -f imago-ci-run >/dev/null 2>&1
# Its own network namespace (no network: everything is installed), where the DTS suites
# make theirs; privileged for namespaces and hugetlbfs.
podman run --name imago-ci-run --privileged --network none \
  -e CI=true -e IMAGO_KEEP_HOST_HUGEPAGES=1 \
  -v "$src:/src" -v /dev/hugepages:/dev/hugepages \
  localhost/imago-ci ./scripts/test.sh
rc=$?
[ "$keep" -eq 1 ] || podman rm -f imago-ci-run >/dev/null 2>&1
step "container: done, the test command exited $rc"
echo "container-test: $(($(date +%s) - t0)) s in all"
exit "$rc"
