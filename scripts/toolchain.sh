#!/usr/bin/env bash
# Makes sure the build and test toolchain is present: Debian's clang-16, lld-16, wasi-libc
# and the wasm32 compiler runtime for the guest; gcc for `go test -race` (cgo) and the
# native benchmark build; curl and CA certificates to fetch the QuickJS sources where npm
# is absent. Installs what is missing when running as root with apt-get; otherwise stops
# with the exact command to run.
set -euo pipefail

packages="clang-16 lld-16 wasi-libc libclang-rt-16-dev-wasm32 gcc libc6-dev"
command -v npm >/dev/null 2>&1 || packages="$packages curl ca-certificates"
missing=0
command -v clang-16 >/dev/null 2>&1 || missing=1
command -v wasm-ld-16 >/dev/null 2>&1 || missing=1
[ -f /usr/include/wasm32-wasi/stdlib.h ] || missing=1
[ -f /usr/lib/llvm-16/lib/clang/16/lib/wasi/libclang_rt.builtins-wasm32.a ] || missing=1
command -v gcc >/dev/null 2>&1 || missing=1
[ -f /usr/include/stdio.h ] || missing=1
command -v npm >/dev/null 2>&1 || command -v curl >/dev/null 2>&1 || missing=1
[ "$missing" = 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "toolchain: installing $packages" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq $packages >/dev/null
	exit 0
fi
echo "toolchain: missing build tools; run:" >&2
echo "  sudo apt-get update && sudo apt-get install -y $packages" >&2
exit 1
