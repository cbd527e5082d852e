#!/usr/bin/env bash
# Build the nevis container images with podman, from a Debian bookworm base made here.
#
#   docker/build.sh                 # base, coordinator, worker (CPU), probe worker,
#                                   # learner base, example learner
#   docker/build.sh --cuda          # ... and the CUDA worker (downloads CUDA PyTorch, GBs)
#   docker/build.sh worker coordinator   # only these (and what they need)
#
# The base image (localhost/nevis-debian:bookworm) is made once by `debootstrap
# --variant=minbase bookworm` and `podman import`; later runs reuse it (--rebuild-base makes a
# new one). Every image installs the exact versions of docker/requirements.lock, with
# --no-deps, so no resolver can pull another PyTorch: the CPU images take the CPU wheel of
# torch==2.13.0 from this machine's disk (TORCH_WHEEL, or pip's find-links folders), copied
# into a build context outside the repository; nothing is downloaded for torch.
#
# Environment: PODMAN (podman), NEVIS_OCI_RUNTIME (runc), NEVIS_BUILD_DIR (build context,
# /var/tmp/nevis-image-build), TORCH_WHEEL (path of the CPU wheel), DEBIAN_MIRROR
# (http://deb.debian.org/debian), NICE (nice -n 19: builds yield the CPU), NEVIS_CA_BUNDLE
# (CA certificates for pip's downloads; default: pip's own setting here, PIP_CERT or pip.conf),
# and for --cuda TORCH_CUDA_INDEX_URL (https://download.pytorch.org/whl/cu128).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PODMAN=${PODMAN:-podman}
RUNTIME=${NEVIS_OCI_RUNTIME:-runc}
BUILD_DIR=${NEVIS_BUILD_DIR:-/var/tmp/nevis-image-build}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
NICE=${NICE-nice -n 19}
TORCH_VERSION=2.13.0
TORCH_CUDA_INDEX_URL=${TORCH_CUDA_INDEX_URL:-https://download.pytorch.org/whl/cu128}
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)
BASE=localhost/nevis-debian:bookworm

log() { printf '[build.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

cuda=0 rebuild_base=0 targets=()
for arg in "$@"; do
  case "$arg" in
    --cuda) cuda=1 ;;
    --rebuild-base) rebuild_base=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    coordinator|worker|probe-worker|learner-base|learner-example|worker-cuda) targets+=("$arg") ;;
    *) die "unknown argument '$arg' (images: coordinator worker probe-worker learner-base learner-example worker-cuda)" ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  targets=(coordinator worker probe-worker learner-base learner-example)
  [ "$cuda" = 1 ] && targets+=(worker-cuda)
fi
want() { local t; for t in "${targets[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }
# learner-example is built FROM learner-base, learner-base FROM worker.
want learner-example && ! want learner-base && targets+=(learner-base)
want learner-base && ! want worker && targets+=(worker)

command -v "$PODMAN" >/dev/null || die "podman is not installed (apt-get install podman runc)"
[ -n "$VERSION" ] || die "no version in pyproject.toml"
# One build at a time on this machine (they share the build context and podman's storage).
mkdir -p "$BUILD_DIR"
exec 9>"$BUILD_DIR/.lock"
flock 9

# --- 1. The base image: Debian bookworm, minbase, made here (no registry is pulled). -------
if [ "$rebuild_base" = 1 ] || ! "$PODMAN" image exists "$BASE"; then
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
  [ "$(id -u)" = 0 ] || die "debootstrap needs root to make the base image"
  rootfs=$(mktemp -d /var/tmp/nevis-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  log "debootstrap --variant=minbase bookworm ($MIRROR)"
  $NICE debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 \
    || { tail -n 20 "$rootfs.log" >&2; die "debootstrap failed (log: $rootfs.log)"; }
  rm -f "$rootfs.log"
  cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  # Small images: no docs, manpages or locales from later apt-get installs; no apt caches.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/01-nevis-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\nAcquire::Languages "none";\n' \
    >"$rootfs/etc/apt/apt.conf.d/01-nevis-norecommends"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
  log "podman import -> $BASE"
  tar --numeric-owner -C "$rootfs" -c . | "$PODMAN" import \
    --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
    --message "debootstrap --variant=minbase bookworm $MIRROR" - "$BASE" >/dev/null
  rm -rf "$rootfs"; trap - EXIT
else
  log "reusing $BASE"
fi

# --- 2. The build context: sources, lock, Containerfiles, the CPU torch wheel. -------------
find_torch_wheel() {
  local name="torch-${TORCH_VERSION}+cpu-cp311-cp311-manylinux*_x86_64.whl" dir dirs=()
  if [ -n "${TORCH_WHEEL:-}" ]; then echo "$TORCH_WHEEL"; return; fi
  # pip's find-links folders (PIP_FIND_LINKS, pip.conf), then the usual wheelhouses.
  for dir in ${PIP_FIND_LINKS:-} $(python3 -m pip config list 2>/dev/null | sed -n "s/.*find-links='\(.*\)'/\1/p") /opt/wheels "$HOME/wheels"; do
    dirs+=("${dir#file://}")
  done
  for dir in "${dirs[@]}"; do
    [ -d "$dir" ] || continue
    find "$dir" -maxdepth 1 -name "$name" | sort | tail -n 1 | grep . && return
  done
  return 1
}
ctx="$BUILD_DIR/context"
mkdir -p "$ctx/src" "$ctx/docker" "$ctx/wheels"
# rsync -a keeps modification times, so an unchanged tree gives the same layers (cache hits).
rsync -a --delete --exclude __pycache__ --exclude '*.pyc' --exclude '*.egg-info' \
  pyproject.toml README.md services workers "$ctx/src/"
rsync -a --delete --exclude __pycache__ --exclude build.sh docker/ "$ctx/docker/"
# The CA bundle pip uses here (PIP_CERT, pip.conf's cert; NEVIS_CA_BUNDLE wins): builds bind
# it for their downloads (a TLS-intercepting proxy), the images never keep it.
mkdir -p "$ctx/certs"
ca=${NEVIS_CA_BUNDLE:-${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}}
if [ -n "$ca" ] && [ -s "$ca" ]; then
  cmp -s "$ca" "$ctx/certs/ca.crt" || cp "$ca" "$ctx/certs/ca.crt"
else
  rm -f "$ctx/certs/ca.crt"
fi
if want worker || want probe-worker; then
  wheel=$(find_torch_wheel) || die "the CPU wheel torch-${TORCH_VERSION}+cpu (cp311, x86_64) was not found:
  set TORCH_WHEEL=/path/to/torch-${TORCH_VERSION}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
  (pip download torch==${TORCH_VERSION} --no-deps --index-url https://download.pytorch.org/whl/cpu -d DIR)"
  [ -f "$wheel" ] || die "TORCH_WHEEL=$wheel is not a file"
  if [ ! -f "$ctx/wheels/$(basename "$wheel")" ]; then
    rm -f "$ctx"/wheels/*.whl
    ln "$wheel" "$ctx/wheels/" 2>/dev/null || cp "$wheel" "$ctx/wheels/"
  fi
  log "torch wheel: $wheel"
fi

build() {  # build IMAGE CONTAINERFILE [podman build args...]
  local image=$1 file=$2; shift 2
  local start=$SECONDS
  log "building $image ($file)"
  $NICE "$PODMAN" build --runtime "$RUNTIME" --network host --layers \
    --build-arg BASE="$BASE" --build-arg VERSION="$VERSION" \
    -f "$ctx/docker/$file" -t "$image" "$@" "$ctx" \
    || die "building $image failed"
  log "built $image in $((SECONDS - start)) s, $("$PODMAN" image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}')"
}

venv() {  # venv TORCH [args]: the venv stage for TORCH=cpu|cuda|none
  local torch=$1; shift
  build "localhost/nevis-venv:$VERSION-$( [ "$torch" = none ] && echo notorch || echo "$torch")" \
    venv.Containerfile --build-arg TORCH="$torch" "$@"
}
if want worker || want probe-worker; then venv cpu; fi
want coordinator && venv none
want worker-cuda && venv cuda --build-arg TORCH_CUDA_INDEX_URL="$TORCH_CUDA_INDEX_URL"

want coordinator && build "localhost/nevis-coordinator:$VERSION" coordinator.Containerfile \
  --build-arg VENV="localhost/nevis-venv:$VERSION-notorch"
want worker && build "localhost/nevis-worker:$VERSION" worker.Containerfile \
  --build-arg VENV="localhost/nevis-venv:$VERSION-cpu"
want probe-worker && build "localhost/nevis-probe-worker:$VERSION" probe-worker.Containerfile \
  --build-arg VENV="localhost/nevis-venv:$VERSION-cpu"
want learner-base && build "localhost/nevis-learner-base:$VERSION" learner-base.Containerfile \
  --build-arg WORKER_IMAGE="localhost/nevis-worker:$VERSION"
want learner-example && build "localhost/nevis-learner-example:$VERSION" learner-example.Containerfile \
  --build-arg LEARNER_BASE="localhost/nevis-learner-base:$VERSION"
want worker-cuda && build "localhost/nevis-worker:$VERSION-cuda" worker.Containerfile \
  --build-arg VENV="localhost/nevis-venv:$VERSION-cuda" --build-arg GPU=all
# Images that an earlier build made and this one replaced (untagged, no child) are removed;
# the layers of the images just built, the build cache of the next run, are kept.
"$PODMAN" image prune -f >/dev/null || log "warning: podman image prune failed"
log "done: $(printf '%s ' "${targets[@]}")"
