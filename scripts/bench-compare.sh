#!/bin/sh
# make bench-compare: installs Deno 2.9.6 from npm into build/tools/deno (gitignored)
# when it is not there, builds bin/libos, and runs scripts/benchcompare, which writes
# BENCHMARKS.md. Arguments are passed to it (for example -reps 5 -out '' for a short
# look that writes nothing).
set -eu
cd "$(dirname "$0")/.."
DENO_VERSION=2.9.6
DENO=build/tools/deno/node_modules/deno/deno
if ! "$DENO" --version 2>/dev/null | grep -q "^deno $DENO_VERSION "; then
	command -v npm >/dev/null || { echo "bench-compare: npm is needed to install Deno: apt-get install -y npm" >&2; exit 1; }
	mkdir -p build/tools/deno
	# The deno package's bin is a copy of its platform package's binary (@deno/linux-x64-glibc,
	# ...), which npm installs as an optional dependency; its postinstall only links it.
	npm install --prefix build/tools/deno --no-save --no-audit --no-fund "deno@$DENO_VERSION" >&2
	[ -x "$DENO" ] || DENO=$(ls build/tools/deno/node_modules/@deno/*/deno | head -n 1)
fi
"$DENO" --version | head -n 1 >&2
GO=${GO:-go} scripts/build-seeded.sh bin/libos
exec ${GO:-go} run ./scripts/benchcompare -deno "$DENO" -command "make bench-compare" "$@"
