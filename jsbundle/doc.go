// Package jsbundle turns a JIT candidate's TypeScript source into a program the
// sandbox can run, or into diagnostics that say exactly what to fix.
//
// It owns transpilation with esbuild's Go API, the static checks on a real AST
// (forbidden imports, dynamic code, forbidden globals), the export contract
// (exactly one `export function run`), and diagnostics with line and column in the
// original TypeScript. It must not run code.
package jsbundle
