// Package dirwatch records every entry created in or removed from a directory tree
// while a test runs something, through inotify (Linux only; on other systems the
// package is empty).
//
// It is for tests that prove a program created nothing in a directory (the compilation
// cache of a command that compiles nothing), or count what it created: a file created
// and removed at once, such as a probe that a directory can be written, leaves no trace
// a before-and-after description (package dirstate) can see, but its creation is an
// event here. The kernel queues the events as they happen, so those of a child process
// that has exited are all in the queue when Stop reads it.
//
// What happens in a directory that existed when Watch was called is recorded in full.
// A directory that appears later is watched as soon as its creation is read, and what
// it holds by then is recorded as created; an entry made and removed inside it before
// that is missed (inotify watches one directory at a time). The creation of the
// directory itself is always recorded, so "nothing was created" is proved either way;
// to count short-lived files, watch a directory made before Watch.
//
// It owns one inotify instance per Watch and the watches on the tree's directories,
// including those created while it watches. It must not be imported by production
// code. Data: the kernel's inotify events in; a list of Events out.
package dirwatch
