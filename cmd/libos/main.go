package main

import (
	"fmt"
	"os"
)

// version is the libOS version, set at link time for releases.
var version = "0.0.0-dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		fmt.Println("libos", version)
		return
	}
	fmt.Fprintln(os.Stderr, "libos: no commands yet; see README.md")
	os.Exit(2)
}
