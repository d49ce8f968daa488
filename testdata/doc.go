// Package testdata holds shared test inputs: JIT candidates, syscall tapes, images,
// Skills, golden outputs and fuzz corpora. It contains no code that the product runs.
package testdata
