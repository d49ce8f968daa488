package tools

// ForgetMemos empties the compiled-schema and compiled-source memos, so that a test can
// compare a validation that computes everything with one that reuses.
func ForgetMemos() {
	schemaMemo.reset()
	compileMemo.reset()
}

// SourceMemoized reports whether the compiled-source memo holds c's source as Validate
// with lim would look it up.
func SourceMemoized(c Candidate, lim Limits) bool {
	_, ok := compileMemo.get(sourceKey(c.SourceCode, sourceOptions(lim.withDefaults())))
	return ok
}
