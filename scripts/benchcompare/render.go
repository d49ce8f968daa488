package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

func ratioAtMost(x float64) func(row) bool {
	return func(r row) bool { return r.ratio > 0 && r.ratio <= x }
}

func num(v float64, unit string) string {
	switch {
	case unit == "×":
		return fmt.Sprintf("%.2f", v)
	case unit == "calls/s":
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func (s stats) format(unit string) string {
	if s.p50 == s.p90 && s.p90 == s.p99 {
		if unit == "×" {
			return num(s.p50, unit) + unit
		}
		return num(s.p50, unit) + " " + unit
	}
	return fmt.Sprintf("%s %s (p90 %s, p99 %s)", num(s.p50, unit), unit, num(s.p90, unit), num(s.p99, unit))
}

func (r row) fmtA() string { return r.a.format(r.unit) }

func (r row) fmtB() string {
	if r.bText != "" {
		return r.bText
	}
	return r.b.format(r.unit)
}

func (r row) fmtRatio() string {
	if r.ratioText != "" {
		return r.ratioText
	}
	return fmt.Sprintf("%.2f×", r.ratio)
}

func (r row) verdict() string {
	if r.meets == nil {
		return "—"
	}
	if r.meets(r) {
		return "met (" + r.target + ")"
	}
	return "**missed** (" + r.target + ")"
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func version(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

func render(e *env, rows []row, load0, load1 string, took time.Duration) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Benchmarks: libOS beside Deno\n\n")
	w("Written by `%s` (`scripts/benchcompare`); every figure below is from one run of it.\n", e.cfg.command)
	w("Each row runs the libOS side and the Deno side interleaved (A B, B A, …), so a noisy moment\n")
	w("slows both; *ratio* is the median of the per-repetition ratios libOS/Deno (below 1: libOS\n")
	w("is faster or smaller). Figures are medians with p90 and p99 of the repetitions.\n\n")
	w("- Machine: %s, %d logical CPUs (GOMAXPROCS %d), %s/%s, %s\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, version("uname", "-r"))
	w("- Load average (1, 5, 15 min): %s at the start, %s at the end. The machine is shared with\n", load0, load1)
	w("  other builds and tests while this runs, so absolute times are inflated and noisy; the\n")
	w("  interleaved ratios are the figures to read.\n")
	w("- libOS: %s, built by `make build`; %s\n", version(e.cfg.libos, "version"), runtime.Version())
	w("- Deno: %s, installed from npm (`deno@2.9.6`) into build/tools/deno\n", version(e.cfg.deno, "--version"))
	w("- Repetitions: %d per whole-process row, %d per in-process row; took %s; %s\n\n", e.cfg.reps, e.cfg.inproc, took.Round(time.Second), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	w("| job | libOS | Deno | libOS/Deno | target |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		job := r.job
		if r.note != "" {
			job += " (" + r.note + ")"
		}
		w("| %s | %s | %s | %s | %s |\n", job, r.fmtA(), r.fmtB(), r.fmtRatio(), r.verdict())
	}
	w("\n## Targets\n\n")
	for _, r := range rows {
		if r.meets == nil {
			continue
		}
		w("- %s: %s — libOS %s", r.job, r.verdict(), r.fmtA())
		if r.ratioText == "" && r.unit != "×" && r.unit != "calls/s" {
			other := "Deno"
			if strings.Contains(r.note, "native") {
				other = "native QuickJS"
			}
			w(", %s %s", r.fmtRatio(), other)
		}
		w("\n")
	}
	w("\n## Where Deno wins\n\n")
	for _, r := range rows {
		if r.ratioText == "" && r.unit != "calls/s" && r.ratio > 1 && !strings.Contains(r.note, "native") {
			w("- %s: libOS/Deno %s\n", r.job, r.fmtRatio())
		}
		if r.unit == "calls/s" && r.ratio < 1 {
			w("- %s: libOS/Deno %s\n", r.job, r.fmtRatio())
		}
	}
	w("\nWhy, from the profiles, is in the notes at the end.\n")
	w("\n## What each row measures\n\n")
	for _, r := range rows {
		w("- **%s**: %s.\n", r.job, r.what)
	}
	w("\n## The Deno side\n\n")
	w("`scripts/benchcompare/validator.ts` is the validator a user would write with Deno: the\n")
	w("same tape semantics (ordered entries, a name or args mismatch rejects at that call and\n")
	w("fails the test even when caught, leftovers fail, exact JSON equality of the result). It\n")
	w("does less than libOS: no static checks on the AST, no schema lint beyond a small subset,\n")
	w("no fresh context per test (a validation's tests share one module instance), no fuel,\n")
	w("memory or time limits, no exact number text. The comparison is generous to Deno.\n")
	if notes, err := os.ReadFile("scripts/benchcompare/notes.md"); err == nil {
		w("\n%s", notes)
	}
	return b.String()
}
