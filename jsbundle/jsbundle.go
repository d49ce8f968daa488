package jsbundle

import "github.com/agentlibos/libos/liberr"

// Options configures Compile. The zero value is ready to use.
type Options struct {
	// MaxSourceBytes bounds the TypeScript source, checked before anything parses it.
	// Zero means DefaultMaxSourceBytes.
	MaxSourceBytes int
}

// DefaultMaxSourceBytes is the source limit used when Options.MaxSourceBytes is zero.
const DefaultMaxSourceBytes = 64 << 10

// Severity says whether a diagnostic rejects the program.
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Diagnostic is one finding about a source, as data. Line and Column are 1-based and name
// a place in the original TypeScript; Column counts UTF-16 code units (as JavaScript
// strings, editors speaking LSP, and source maps do), so a line of ASCII counts bytes.
type Diagnostic struct {
	Code     string   `json:"code"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	Line     int      `json:"line"`
	Column   int      `json:"column"`
}

// Program is a source that passed every check.
type Program struct {
	// Source is JavaScript for the sandbox: a strict-mode global script (no module
	// syntax, nothing to load) whose only contract is the global function declaration
	// run(args, libos). It targets ES2020, the language QuickJS 2021 runs.
	Source string
}

// Diagnostic codes. They are stable: the model, the validation record and tests match on
// them.
const (
	CodeSourceTooLarge         = "source_too_large"
	CodeTooComplex             = "source_too_complex" // nesting beyond what the compiler bounds
	CodeSyntaxError            = string(liberr.CodeSyntaxError)
	CodeUnsupportedSyntax      = "unsupported_syntax" // valid TypeScript esbuild cannot lower to ES2020
	CodeImportForbidden        = "import_forbidden"
	CodeReexportForbidden      = "reexport_forbidden"
	CodeReferenceDirective     = "reference_directive_forbidden"
	CodeImportEqualsForbidden  = "import_equals_forbidden"
	CodeExportAssignment       = "export_assignment_forbidden"
	CodeDynamicImportForbidden = "dynamic_import_forbidden"
	CodeImportMetaForbidden    = "import_meta_forbidden"
	CodeRequireForbidden       = "require_forbidden"
	CodeEvalForbidden          = "eval_forbidden"
	CodeFunctionConstructor    = "function_constructor_forbidden"
	CodeGlobalForbidden        = "global_forbidden"        // Deno, WebAssembly, process
	CodeGlobalAccessForbidden  = "global_access_forbidden" // globalThis/self/window other than .name
	CodeRunExportMissing       = "run_export_missing"
	CodeRunExportInvalid       = "run_export_invalid"
	CodeDefaultExport          = "default_export_forbidden"
	CodeExtraExport            = "extra_export"
	CodeRunParams              = "run_params" // warning: run takes more than (args, libos)
	CodeTranspileWarning       = "transpile_warning"
	CodeInternal               = "internal_error"
)

// HasErrors reports whether any diagnostic has error severity.
func HasErrors(diags []Diagnostic) bool {
	for _, d := range diags {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}
