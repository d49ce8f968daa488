// Command benchcompare measures libOS beside Deno at the jobs a user would otherwise give
// Deno: validating a candidate as a whole process (warm and empty caches), validating in
// a warm process, an isolated JIT call (volatile and durable), calls per second at
// concurrency 16, CPU-bound JavaScript (against native QuickJS too) and memory. It is
// run by `make bench-compare` (scripts/bench-compare.sh), never by `make test`, and
// writes BENCHMARKS.md.
//
// It owns nothing the product uses: it drives the libos binary, the public packages
// libos and wasm, and a Deno process running validator.ts (the Deno side), and it must
// not reach into internal packages. Data comes from testdata/candidates; results go to
// stderr as they are measured and to BENCHMARKS.md at the end, only when every run of
// both sides succeeded.
package main
