#!/usr/bin/env bash
# Builds qjs-bench: the guest's QuickJS core (same sources, same quickjs.patch) compiled
# natively with gcc, so that benchmarks can report the wasm/native ratio. Bench-only; never
# part of the product. The CLI is documented in qjs-bench.c and ABI.md.
#
# usage: wasm/guest/build-native.sh BUILD_DIR OUT
set -euo pipefail

build=${1:?usage: build-native.sh BUILD_DIR OUT}
out=${2:?usage: build-native.sh BUILD_DIR OUT}
here=$(cd "$(dirname "$0")" && pwd)
src="$build/quickjs"
work="$build/native-src"
cc=${NATIVE_CC:-gcc}

die() { echo "build-native.sh: $*" >&2; exit 1; }

[ -f "$src/.verified" ] || die "$src is not a verified QuickJS tree; run: scripts/fetch-quickjs.sh $build"
command -v "$cc" >/dev/null || die "$cc not found; run: apt-get install -y gcc"
command -v patch >/dev/null || die "patch not found; run: apt-get install -y patch"

rm -rf "$work"
mkdir -p "$work" "$(dirname "$out")"
cp "$src"/*.c "$src"/*.h "$work/"
(cd "$work" && patch -p1 --forward --no-backup-if-mismatch --quiet) < "$here/quickjs.patch" \
	|| die "wasm/guest/quickjs.patch does not apply to $src"
cp "$here/qjs-bench.c" "$work/"

"$cc" -O2 -D_GNU_SOURCE '-DCONFIG_VERSION="2021-03-27"' -DCONFIG_BIGNUM -w \
	-o "$out.tmp" "$work"/quickjs.c "$work"/libregexp.c "$work"/libunicode.c \
	"$work"/cutils.c "$work"/libbf.c "$work"/qjs-bench.c -lm -lpthread \
	|| die "compile failed"
mv "$out.tmp" "$out"
