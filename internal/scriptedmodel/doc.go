// Package scriptedmodel provides scripted stand-ins for model providers,
// for tests: HTTP handlers that speak Anthropic's Messages API and
// OpenAI's Responses and Chat Completions APIs as the real agent CLIs call them (streaming
// server-sent events or one JSON body), and answer each turn of the
// agent's loop with the next step of a script: a tool call, or the final
// text. The turn is the number of tool results the request carries back,
// so the handler keeps no state between requests and a retried request
// gets the same answer. Requests that declare no tools (an agent's side
// queries: titles, summaries) get a short text.
//
// It is served on loopback by tests, standing in for a provider behind a
// model gateway; it never reaches anything itself.
package scriptedmodel
