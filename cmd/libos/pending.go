package main

import "github.com/spf13/cobra"

func newDemoCmd(e *env) *cobra.Command     { return &cobra.Command{Use: "demo", Hidden: true} }
func operatorCmds(e *env) []*cobra.Command { return nil }
