package main

import "github.com/spf13/cobra"

func newValidateCmd(e *env) *cobra.Command { return &cobra.Command{Use: "validate", Hidden: true} }
func newDemoCmd(e *env) *cobra.Command     { return &cobra.Command{Use: "demo", Hidden: true} }
func operatorCmds(e *env) []*cobra.Command { return nil }
