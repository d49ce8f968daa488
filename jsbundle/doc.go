// Package jsbundle turns a JIT candidate's TypeScript source into a program the
// sandbox can run, or into diagnostics that say exactly what to fix.
//
// It owns transpilation with esbuild's Go API, the static checks on a real AST
// (forbidden imports, dynamic code, forbidden globals), the export contract
// (exactly one `export function run`), and diagnostics with line and column in the
// original TypeScript. It must not run code, and it knows nothing of tools, processes,
// capabilities or storage.
//
// Data comes in as the candidate's source_code string (from the validate and register
// tools) and leaves as a Program, whose Source the sandbox (package wasm) evaluates as a
// global strict-mode script before calling the global function run(args, libos), and as
// []Diagnostic, which the validation record stores and the model reads.
//
// Compile works in this order: the size limit; bounds on nesting and on the length of one
// expression (esbuild's parser is superlinear on a few shapes, and the output's parser
// refuses expressions chained past 1,000) and a token scan of the TypeScript, on one lexing of it,
// for the module forms that esbuild erases (type-only imports, import-equals, `export =`,
// triple-slash directives, type exports) and for the export contract; esbuild's transform to ES2020, whose errors
// and warnings become diagnostics; a second transform in which every free use of a watched
// global (eval, Function, require, Deno, WebAssembly, process, globalThis, self, window,
// import.meta) is replaced by a member of a unique probe object, so that esbuild's own
// scope analysis decides what is global, and whose output is parsed with
// tdewolff/parse/v2/js and walked; positions found there map back to the TypeScript
// through esbuild's source map. Columns are UTF-16 code units. The second transform is
// skipped when the first output has no word equal to a watched name: it would replace
// nothing and print the same text, so that text is walked instead (a test compares both
// ways on every known source, and the fuzz target on every input).
//
// At most MaxConcurrentCompiles compiles run at once, each bounded in what it allocates, so
// a burst of proposals cannot add up to an unbounded heap.
//
// Nothing is cached between calls except what does not depend on the source: the esbuild
// options and the default probe's define map are built once.
package jsbundle
