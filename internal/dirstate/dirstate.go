package dirstate

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
)

// Of describes dir (the package comment says how); the error is the first that reading
// it met.
func Of(dir string) ([]string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	out := []string{fmt.Sprintf(". %v %d", fi.Mode(), fi.ModTime().UnixNano())}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("%s %v %d %d %x", e.Name(), fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), sha256.Sum256(b)))
	}
	return out, nil
}
