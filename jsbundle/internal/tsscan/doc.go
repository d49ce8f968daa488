// Package tsscan finds, in TypeScript source, the module forms that esbuild erases or
// rewrites before any JavaScript parser could see them: import and export declarations
// (type-only ones included), import-equals, export assignments and triple-slash
// directives. It works on tokens, never on raw text, so a string, template or comment
// that contains "import" is never mistaken for code.
//
// The scan is a gate for forms that leave no trace in the compiled JavaScript; every
// form that survives compilation (import(), import.meta, kept imports and exports) is
// checked again on the parsed output, so a token-level mistake here cannot let code run.
//
// It reports places and forms to jsbundle's compiler, which decides the diagnostics.
package tsscan
