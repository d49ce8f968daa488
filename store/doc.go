// Package store keeps everything that must survive a crash, in one Pebble directory.
//
// It owns the key layout, the encodings, the format version and durable batches. It
// holds data and guarantees, never policy: what may be written, by whom, is decided in
// package engine.
package store
