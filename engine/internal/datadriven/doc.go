// Package datadriven runs spec-like test files: each case is a command line, the rule
// of the specification it checks, an input, a "----" separator and the expected
// output. Running the tests with -rewrite regenerates the expected outputs.
//
//	frame name=trim-name
//	rule: the adapter trims the function name
//	{"name":"  echo  "}
//	----
//	name: echo
//
// Cases are separated by blank lines; lines starting with # outside a case are
// comments.
//
// It is a test helper: it reads files under testdata and writes them only with -rewrite;
// product code must not import it.
package datadriven
