package main

import "github.com/spf13/cobra"

func operatorCmds(e *env) []*cobra.Command { return nil }
