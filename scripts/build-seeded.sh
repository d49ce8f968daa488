#!/bin/sh
# make build: bin/libos with the sandbox guest already compiled for this machine's
# platform (wasm/internal/seed). It builds libos, runs 'libos cache warm' into an empty
# directory, puts what wazero wrote there into wasm/internal/seed/data (gitignored) with
# the guest's SHA-256, and builds again with the tag libos_seed, which embeds it. The
# first 'libos validate' with an empty cache directory then installs the entry instead of
# compiling. When GOOS/GOARCH name another platform the binary cannot run here, so it is
# built without a seed.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
OUT=${1:-bin/libos}
export CGO_ENABLED=0
"$GO" build -o "$OUT" ./cmd/libos
if [ "$("$GO" env GOOS)/$("$GO" env GOARCH)" != "$("$GO" env GOHOSTOS)/$("$GO" env GOHOSTARCH)" ]; then
	echo "build-seeded: cross build, no seed" >&2
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$OUT" cache warm --cache-dir "$tmp/cache" >/dev/null
data=wasm/internal/seed/data
rm -rf "$data"
mkdir -p "$data"
cp -R "$tmp/cache/." "$data/"
sha256sum < wasm/libos_guest.wasm | cut -d' ' -f1 > "$data/GUEST_SHA256"
"$GO" build -tags libos_seed -o "$OUT" ./cmd/libos
