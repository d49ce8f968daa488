package tools_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/syscalls"
	"github.com/agentlibos/libos/tools"
)

// TestSyscallRefusalKeepsItsLayerThroughTheKernel: one error model, "one error type
// shape used by every package (code, message, details, wrapped cause, errors.Is/As
// working across layers), no recovery of codes from text". A data-flow refusal at the
// model sink reaches the MCP caller through tools and the kernel; the refusal itself is
// still in the chain with Layer "syscalls", its code, and a Message that does not
// repeat the layer's name (Error() adds it).
func TestSyscallRefusalKeepsItsLayerThroughTheKernel(t *testing.T) {
	sink := newServer(t, func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "ok") })
	img := fetchImage(t, fmt.Sprintf(`net:
  allow: ["%s"]
  allow_addresses: ["127.0.0.1"]
labels:
  kv: {"hr/*": confidential}
data_flow:
  - {label: confidential, deny: [net.fetch, model]}
`, sink.hostport()))
	w := openWorld(t, t.TempDir(), tools.Config{})
	pid := w.spawnWithTool(t, img, "seed", seedSource)
	w.register(t, pid, "catcher", catcherSource)
	w.mustCall(t, pid, "seed", `{}`)

	_, err := w.call(t, pid, "catcher", fmt.Sprintf(`{"url":%q}`, sink.URL+"/"))
	if err == nil {
		t.Fatal("a labelled result reached the model")
	}
	se, ok := liberr.AsLayer(err, syscalls.Layer)
	if !ok {
		t.Fatalf("no error of layer %q in the chain of %v", syscalls.Layer, err)
	}
	if se.Code != syscalls.CodeDataFlowDenied {
		t.Fatalf("the syscalls error's code is %q, want %s", se.Code, syscalls.CodeDataFlowDenied)
	}
	if strings.HasPrefix(se.Message, syscalls.Layer+":") || se.Error() != syscalls.Layer+": "+se.Message {
		t.Fatalf("Message %q, Error() %q: the layer's name belongs to Error() alone", se.Message, se.Error())
	}
	if !errors.Is(err, syscalls.ErrDataFlowDenied) || liberr.CodeOf(err) != syscalls.CodeDataFlowDenied {
		t.Fatalf("errors.Is and CodeOf see %q through the layers, want %s", liberr.CodeOf(err), syscalls.CodeDataFlowDenied)
	}
}
