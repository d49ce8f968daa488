#!/usr/bin/env bash
# Makes sure the guest toolchain is present: Debian's clang-16, lld-16, wasi-libc and
# the wasm32 compiler runtime. Installs them when running as root with apt-get;
# otherwise stops with the exact command to run.
set -euo pipefail

packages="clang-16 lld-16 wasi-libc libclang-rt-16-dev-wasm32"
missing=0
command -v clang-16 >/dev/null 2>&1 || missing=1
command -v wasm-ld-16 >/dev/null 2>&1 || missing=1
[ -f /usr/include/wasm32-wasi/stdlib.h ] || missing=1
[ -f /usr/lib/llvm-16/lib/clang/16/lib/wasi/libclang_rt.builtins-wasm32.a ] || missing=1
[ "$missing" = 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "toolchain: installing $packages" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq $packages >/dev/null
	exit 0
fi
echo "toolchain: missing guest toolchain; run:" >&2
echo "  sudo apt-get update && sudo apt-get install -y $packages" >&2
exit 1
