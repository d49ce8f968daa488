package syscalls

import (
	"errors"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/agentlibos/libos/internal/schemaerr"
	"github.com/agentlibos/libos/liberr"
)

var printer = message.NewPrinter(language.English)

// maxSchemaMessage bounds the text of a schema violation.
const maxSchemaMessage = 512

// schemaMessage renders a validation error as one line: each leaf violation with the
// JSON pointer of the offending value, e.g. `at /timezone: minLength: got 0, want 1`.
func schemaMessage(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(schemaerr.Canonical(err), &ve) {
		return err.Error()
	}
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			parts = append(parts, "at /"+strings.Join(e.InstanceLocation, "/")+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return liberr.Clip(strings.Join(parts, "; "), maxSchemaMessage)
}
