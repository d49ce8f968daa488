// Package dirstate describes a directory as a list of lines, one per entry: its name,
// mode, size, modification time and the SHA-256 of its content, and the directory's own
// mode and modification time, which a created, renamed or removed entry changes.
//
// It is for tests that prove a program only read a directory (a read-only open of a
// store, the libos command's read-only commands): two descriptions taken before and
// after are equal exactly when nothing in the directory was written, created, renamed
// or removed. It owns nothing else and decides nothing; it reads the directory's top
// level only (a store keeps no subdirectories).
package dirstate
