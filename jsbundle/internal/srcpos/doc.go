// Package srcpos converts between byte offsets, lines and UTF-16 columns, and reads the
// source maps that esbuild writes, so that every diagnostic can name a place in the
// original TypeScript.
//
// Lines follow ECMAScript: LF, CR, CRLF, U+2028 and U+2029 end a line, as in esbuild's
// lexer, so a position computed here and one read from an esbuild source map agree.
// Columns are counted in UTF-16 code units, as in source maps and in JavaScript strings.
//
// It only maps positions; it never parses or judges the program.
package srcpos
