package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentlibos/libos/mcpserver"
)

// newTokenCmd is 'libos token': the static bearer tokens of 'serve --auth-tokens'.
func newTokenCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "token",
		Short: "Make bearer tokens for 'libos serve --http --auth-tokens'",
		Args:  cobra.NoArgs,
	}
	var id, file string
	var scopes []string
	nw := &cobra.Command{
		Use:   "new",
		Short: "Make a bearer token and the token-file line that stands for it",
		Long: `new makes a random bearer token with an id and scopes. The token is printed on stdout,
once: hand it to the client. The token file keeps only its SHA-256, as the line

  ID sha256:HEX SCOPE...

With --file the line is appended to FILE (created with mode 0600); without it, the line
is printed on stderr. 'libos serve' reads the file at start: restart it to add or
remove a token.

Scopes:
  libos:process:PID   the MCP surface of process PID (repeat for several)
  libos:process:*     every process of the store
  libos:operator      operator rights on the processes the token covers

A token made elsewhere is listed the same way: its line is its id, "sha256:" and the
hex SHA-256 of the token's bytes (printf %s "$TOKEN" | sha256sum), and its scopes.`,
		Example: `  libos token new --id ci --scope libos:process:pid_0123... --file tokens.txt > ci.token
  libos token new --id ops --scope 'libos:process:*' --scope libos:operator --file tokens.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			secret, line, err := mcpserver.NewToken(id, scopes)
			if err != nil {
				return usageErr("token new: %w", err)
			}
			if file == "" {
				fmt.Fprintf(e.stderr, "add this line to the token file of 'libos serve --auth-tokens':\n%s\n", line)
				fmt.Fprintln(e.stdout, secret)
				return nil
			}
			old, err := os.ReadFile(file)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return usageErr("token new: %v", err)
			}
			prefix := ""
			if len(old) > 0 && !strings.HasSuffix(string(old), "\n") {
				prefix = "\n"
			}
			// The file with the new line must still be one serve accepts (no id twice).
			if _, err := mcpserver.ParseTokenFile(append(old, []byte(prefix+line+"\n")...)); err != nil {
				return usageErr("token new: %s: %w", file, err)
			}
			fh, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return usageErr("token new: %v", err)
			}
			if _, err := fh.WriteString(prefix + line + "\n"); err != nil {
				fh.Close()
				return usageErr("token new: %s: %v", file, err)
			}
			if err := fh.Close(); err != nil {
				return usageErr("token new: %s: %v", file, err)
			}
			fmt.Fprintln(e.stdout, secret)
			e.log.Info("token added", "id", id, "file", file, "scopes", strings.Join(scopes, " "))
			return nil
		},
	}
	nw.Flags().StringVar(&id, "id", "", "the token's id: named in logs and in the audit log, never the token (required)")
	nw.Flags().StringArrayVar(&scopes, "scope", nil, "a scope of the token (repeatable; at least one process scope)")
	nw.Flags().StringVar(&file, "file", "", "append the token's line to this token file")
	_ = nw.MarkFlagRequired("id")
	_ = nw.MarkFlagRequired("scope")
	_ = nw.MarkFlagFilename("file")
	c.AddCommand(nw)
	return c
}
