package jsbundle

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/agentlibos/libos/jsbundle/internal/srcpos"
	"github.com/agentlibos/libos/jsbundle/internal/tsscan"
)

var knownCodes = map[string]bool{
	CodeSourceTooLarge: true, CodeTooComplex: true, CodeSyntaxError: true, CodeUnsupportedSyntax: true, CodeImportForbidden: true,
	CodeReexportForbidden: true, CodeReferenceDirective: true, CodeImportEqualsForbidden: true,
	CodeExportAssignment: true, CodeDynamicImportForbidden: true, CodeImportMetaForbidden: true,
	CodeRequireForbidden: true, CodeEvalForbidden: true, CodeFunctionConstructor: true, CodeGlobalForbidden: true,
	CodeGlobalAccessForbidden: true, CodeRunExportMissing: true, CodeRunExportInvalid: true, CodeDefaultExport: true,
	CodeExtraExport: true, CodeRunParams: true, CodeTranspileWarning: true, CodeInternal: true,
}

// FuzzCompile: whatever the source, Compile returns; a Program comes exactly when there is
// no error; every diagnostic has a known code, a severity and a place inside the source;
// an accepted Program is a strict script with no module syntax; and skipping the checking
// transform when the output names no watched global changes nothing. Run it with
// go test -fuzz FuzzCompile ./jsbundle/; crashers are kept under testdata/fuzz.
func FuzzCompile(f *testing.F) {
	if data, err := os.ReadFile("testdata/compile.txt"); err == nil {
		for _, block := range strings.Split(string(data), "\ncompile ") {
			if src, _, ok := strings.Cut(block, "\n----\n"); ok {
				if _, body, ok := strings.Cut(src, "\n"); ok {
					f.Add(body)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		prog, diags := Compile(src, Options{})
		if p2, d2 := compile(src, Options{}, true); !reflect.DeepEqual(prog, p2) || !reflect.DeepEqual(diags, d2) {
			t.Fatalf("skipping the checking transform changed the result: %+v %+v, probed: %+v %+v", prog, diags, p2, d2)
		}
		if (prog == nil) != HasErrors(diags) {
			t.Fatalf("Program %v with diagnostics %+v", prog != nil, diags)
		}
		idx := srcpos.NewIndex(src)
		for _, d := range diags {
			if !knownCodes[d.Code] || (d.Severity != SeverityError && d.Severity != SeverityWarning) || d.Message == "" {
				t.Fatalf("bad diagnostic %+v", d)
			}
			if d.Line < 1 || d.Line > idx.LineCount() || d.Column < 1 || d.Column > srcpos.UTF16Len(idx.Line(d.Line))+1 {
				t.Fatalf("diagnostic outside the source (%d lines): %+v", idx.LineCount(), d)
			}
			if d.Code == CodeInternal {
				t.Fatalf("internal error: %+v", d)
			}
		}
		if prog != nil {
			if !strings.HasPrefix(prog.Source, "\"use strict\";\n") {
				t.Fatalf("not strict: %q", prog.Source)
			}
			if forms := tsscan.Scan(prog.Source); len(forms) != 0 {
				t.Fatalf("module syntax left: %+v in %q", forms, prog.Source)
			}
		}
	})
}
