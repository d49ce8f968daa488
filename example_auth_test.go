package libos_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentlibos/libos"
	"github.com/agentlibos/libos/mcpserver"
)

// Serve a process over streamable HTTP behind bearer tokens, as 'libos serve --http
// --auth-tokens' does: the token file keeps the token's hash and scope, the handler
// admits only tokens whose scope covers the process. Beyond loopback, add TLS
// (mcpserver.CheckExposure says what is missing); for OAuth access tokens, set
// AuthConfig.OAuth and mount srv.MetadataHandler() at
// mcpserver.ResourceMetadataPath.
func ExampleSystem_MCPServer_authorized() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "libos-example-")
	defer os.RemoveAll(dir)
	sys, err := libos.Open(ctx, dir, libos.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sys.Close()
	img, _ := libos.DefaultImage()
	pid, _ := sys.SpawnImage(ctx, img)

	// What 'libos token new --id ci --scope libos:process:PID' makes: the token for
	// the client, and the file's line, which holds only its SHA-256.
	token, line, _ := mcpserver.NewToken("ci", []string{mcpserver.ProcessScope(pid)})
	tokens, err := mcpserver.ParseTokenFile([]byte(line))
	if err != nil {
		log.Fatal(err)
	}
	auth, err := mcpserver.NewAuthorizer(mcpserver.AuthConfig{Tokens: tokens})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := sys.MCPServer(pid, mcpserver.Options{Auth: auth})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler(nil)) // 127.0.0.1
	defer hs.Close()

	res, _ := http.Post(hs.URL, "application/json", strings.NewReader(`{}`))
	res.Body.Close()
	fmt.Println(res.StatusCode, res.Header.Get("WWW-Authenticate"))

	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL,
		HTTPClient: &http.Client{Transport: withToken{token}}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()
	out, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"hello": "token"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Content[0].(*mcp.TextContent).Text)
	// Output:
	// 401 Bearer
	// {"hello":"token"}
}

// withToken sends a bearer token with every request.
type withToken struct{ token string }

func (t withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}
