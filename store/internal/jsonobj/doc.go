// Package jsonobj checks the JSON objects the store hashes and indexes.
//
// The store's writers pass it the JSON they are about to persist; it rejects what is
// not one object with exact, unique keys, so that what is hashed is what is read back.
// It must not know about keys, records or Pebble.
package jsonobj
