// Package agent is the provider path: the host's loop between a model API and the
// kernel. Each step renders the process's current projection for the provider (the
// OpenAI strict subset or Anthropic tool definitions), sends the conversation with the
// process's instructions as the system prompt, and hands every tool-call frame of the
// model's answer to the kernel exactly as the provider sent it (an arguments string for
// OpenAI, an input object for Anthropic), in order, so the tool-call adapter's rules
// apply to real frames. A JIT tool registered during a step is in the next request's
// tool list in the direct projection, and never in the multiplexed one.
//
// The conversation is durable: each request, response and tool outcome is an event in
// the process's own hash-chained log (bounded: a message over the bound keeps its
// digest and size), written before the loop goes on, so a run resumes after a restart
// from its last settled step. A tool call whose dispatch was recorded but whose outcome
// was not is never sent again: the model is told its settlement is unknown. Provider
// failures (rate limits and 5xx past the loop's bounded retries, timeouts, refusals,
// unusable responses) are typed Error values and provider_failed events, never tool
// failures. API keys are passed to the SDK only: they are never written to the log, and
// an error that a provider made by echoing the key or the base URL's password has them
// redacted (a key the message's clip cut in half included) before it leaves the provider.
//
// The providers are the official SDKs (github.com/openai/openai-go/v3 for chat
// completions, github.com/anthropics/anthropic-sdk-go/v2 for messages), streaming or
// not. The package talks to the kernel through the small Kernel and Log interfaces: it
// does not reach into the kernel's state and adds no policy of its own.
package agent
