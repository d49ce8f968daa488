package tools

// ForgetMemos empties the compiled-schema and compiled-source memos, so that a test can
// compare a validation that computes everything with one that reuses.
func ForgetMemos() {
	schemaMemo.reset()
	compileMemo.reset()
}
