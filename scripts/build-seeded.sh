#!/bin/sh
# make build: bin/libos with the sandbox guest already compiled for this machine's
# platform (wasm/internal/seed). It builds libos, runs 'libos cache warm' into an empty
# directory, packs what wazero (and the snapshot) wrote there with the guest's SHA-256 into
# wasm/internal/seed/data/seed.pack (gitignored), and builds again with the tag
# libos_seed, which embeds it. The
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
# One file, in the format wasm/internal/seed/seed.go reads: a header naming the guest and
# each entry (its path in a cache directory and its length), an empty line, then the
# entries' bytes in the same order.
data=wasm/internal/seed/data
rm -rf "$data"
mkdir -p "$data"
(cd "$tmp/cache" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) > "$tmp/entries"
{
	echo "libos-seed 1"
	echo "guest $(sha256sum < wasm/libos_guest.wasm | cut -d' ' -f1)"
	while IFS= read -r e; do
		echo "entry $e $(wc -c < "$tmp/cache/$e" | tr -d ' ')"
	done < "$tmp/entries"
	echo
	while IFS= read -r e; do
		cat "$tmp/cache/$e"
	done < "$tmp/entries"
} > "$data/seed.pack"
"$GO" build -tags libos_seed -o "$OUT" ./cmd/libos
