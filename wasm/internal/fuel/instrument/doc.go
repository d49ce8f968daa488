// Command instrument adds the fuel check to a WebAssembly module (see package fuel):
//
//	go run ./wasm/internal/fuel/instrument IN.wasm OUT.wasm
//
// wasm/guest/build.sh runs it on the linked guest, so the committed guest is the
// instrumented one. It reads IN and writes OUT only; the output depends on IN alone, so
// the build stays reproducible byte for byte. It prints what it covered on stderr.
package main
