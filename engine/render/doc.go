// Package render writes a projected tool list in the form a model provider reads: MCP
// Tool objects, OpenAI function tools (strict mode where the schema allows it) and
// Anthropic tool definitions.
//
// It owns the list of providers (Providers: the CLI's --format and the MCP server
// take their choices from it), each provider's rendering, and the portability rules
// that keep one tool from making a provider refuse the whole list (root keywords a
// provider refuses are dropped, MCP output schemas that are not object schemas are
// omitted, boolean property schemas are written as objects).
//
// It is pure: it must not hold state, reach the kernel's locks, the store or the
// sandbox. Data comes from engine.Kernel.Tools (the projection of one process) and
// goes to the caller as JSON text; the kernel still validates every call and result
// against the full schemas, whatever a rendering dropped.
package render
