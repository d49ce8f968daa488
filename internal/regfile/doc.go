// Package regfile reads a small file that a user names (a candidate, a secret) whole,
// and only when it is a regular file within a size bound. It opens without blocking, so a
// FIFO with no writer or a device never stalls the caller, and it never reads more than
// one byte past the bound, so /dev/zero or a file that grows cannot fill memory. It owns
// nothing else: callers say in their own words, and with their own error codes, what a
// refusal means for them.
package regfile
