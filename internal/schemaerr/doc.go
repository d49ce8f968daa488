// Package schemaerr puts the findings of the JSON Schema library in one order.
//
// The library (santhosh-tekuri/jsonschema) builds a validation error's causes, and the
// list of an additionalProperties finding, by ranging over Go maps: the instance's
// members, a schema's properties, patternProperties, dependentSchemas. The same value
// against the same schema can therefore be refused with its findings in another order,
// or with "additional properties 'x', 'c'" one time and "'c', 'x'" the next. Everything
// this module derives from those errors (a call's refusal details, a syscall's argument
// error, a validation report, a manifest's problems) is recorded or compared byte for
// byte, so Canonical puts an error tree in one order before anything reads it.
//
// It owns no schema and validates nothing; callers pass the error they got from the
// library and read it afterwards as before.
package schemaerr
