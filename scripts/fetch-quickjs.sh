#!/usr/bin/env bash
# Fetches the QuickJS 2021-03-27 engine sources from the npm package qjsc@0.3.0,
# verifies the tarball against pinned digests, and unpacks the engine directory.
#
# usage: scripts/fetch-quickjs.sh BUILD_DIR
# result: BUILD_DIR/quickjs/ holds deps/quickjs_2021_03_27 of the package.
set -euo pipefail

build=${1:?usage: fetch-quickjs.sh BUILD_DIR}
pkg=qjsc
version=0.3.0
tarball="$pkg-$version.tgz"
sha256=4a9ed1852b334d842d5dac42d1782817ae26310b448de39532451fd45c9ba0ee
sha512=6bbf9c53afc855c65b21e8df7ddb7fc1954c5fa2cbd8c0cbdc743d65be469b6dc6f43bc1312ff3f461c5c73dfd6c0be9d8fbcc38cfb2a52380ca892dd83759db

mkdir -p "$build"
cd "$build"

if [ -f quickjs/.verified ]; then
	exit 0
fi

if [ ! -f "$tarball" ]; then
	if command -v npm >/dev/null 2>&1; then
		npm pack --silent "$pkg@$version" >/dev/null
	elif command -v curl >/dev/null 2>&1; then
		# The same file npm pack downloads, from the same registry.
		curl -fsSL -o "$tarball.part" "https://registry.npmjs.org/$pkg/-/$tarball"
		mv "$tarball.part" "$tarball"
	else
		echo "fetch-quickjs: need npm or curl; run: apt-get install -y curl" >&2
		exit 1
	fi
fi

got256=$(sha256sum "$tarball" | cut -d' ' -f1)
got512=$(sha512sum "$tarball" | cut -d' ' -f1)
if [ "$got256" != "$sha256" ] || [ "$got512" != "$sha512" ]; then
	echo "fetch-quickjs: $tarball does not match the pinned digests" >&2
	echo "  sha256 want $sha256" >&2
	echo "  sha256 got  $got256" >&2
	rm -f "$tarball"
	exit 1
fi

rm -rf quickjs quickjs.tmp
mkdir quickjs.tmp
tar -xzf "$tarball" -C quickjs.tmp package/deps/quickjs_2021_03_27
mv quickjs.tmp/package/deps/quickjs_2021_03_27 quickjs
rm -rf quickjs.tmp
touch quickjs/.verified
