// Command libos is the single binary of Agent libOS: the MCP server, the CI validator,
// diagnostics, the operator commands and a demo. It contains no logic the library lacks.
package main
