package schemaerr

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Canonical orders, in place, every error tree inside err (a *ValidationError, or the
// *ValidationError of a *SchemaValidationError) and returns err. Causes are ordered by
// the instance location (segment by segment, array indices as numbers), then by the
// schema location (the same way), then by what they say; causes equal in all three keep
// their order. The property names of an additionalProperties finding are sorted.
func Canonical(err error) error {
	var se *jsonschema.SchemaValidationError
	if errors.As(err, &se) {
		var ve *jsonschema.ValidationError
		if errors.As(se.Err, &ve) {
			order(ve)
		}
		return err
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		order(ve)
	}
	return err
}

func order(ve *jsonschema.ValidationError) {
	if ap, ok := ve.ErrorKind.(*kind.AdditionalProperties); ok {
		slices.Sort(ap.Properties)
	}
	for _, c := range ve.Causes {
		order(c)
	}
	slices.SortStableFunc(ve.Causes, compare)
}

func compare(a, b *jsonschema.ValidationError) int {
	if c := comparePath(a.InstanceLocation, b.InstanceLocation); c != 0 {
		return c
	}
	if c := comparePath(strings.Split(a.SchemaURL, "/"), strings.Split(b.SchemaURL, "/")); c != 0 {
		return c
	}
	return strings.Compare(a.Error(), b.Error())
}

// comparePath compares two paths segment by segment; two segments that are both
// decimal numbers compare as numbers, so that /2 comes before /10.
func comparePath(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := compareSegment(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func compareSegment(a, b string) int {
	if a == b {
		return 0
	}
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil && x != y {
		if x < y {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}
