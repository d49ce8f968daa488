#!/usr/bin/env bash
# Cross-compiles static libos binaries for the release platforms into DIST_DIR with a
# SHA256SUMS file. Go toolchain only: cgo off, so every binary is static; -trimpath and
# an empty build ID, so two runs on the same commit give the same bytes (the module
# version and VCS revision stamped into the binary come from the commit, not the clock).
#
# usage: scripts/dist.sh [DIST_DIR]   (default dist)
set -euo pipefail

out=${1:-dist}
go=${GO:-go}
platforms="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64"

rm -rf "$out"
mkdir -p "$out"
for p in $platforms; do
	goos=${p%/*}
	goarch=${p#*/}
	name="libos-$goos-$goarch"
	[ "$goos" = windows ] && name="$name.exe"
	echo "dist: $name" >&2
	CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch "$go" build -trimpath -ldflags='-s -w -buildid=' -o "$out/$name" ./cmd/libos
done
(cd "$out" && sha256sum libos-* > SHA256SUMS)
cat "$out/SHA256SUMS"
