// Package trajectory turns the recording of a trial's model calls (a
// gateway.Tape: every request the agent made through Proctor's model
// gateways, and the response it got, in order) into an agent trajectory in
// Harbor's Agent Trajectory Interchange Format, ATIF-v1.7 (Harbor's RFC
// 0001). Harbor's trajectories are written by the agent itself; these are
// read from what the gateway relayed, so they are evidence: the agent
// cannot add, drop or alter a step without the gateway having relayed it.
//
// # What is read
//
// A call is a model turn when it is a POST to Anthropic's Messages
// (…/messages), OpenAI's Responses (…/responses) or Chat Completions
// (…/chat/completions) endpoint; its response may be one JSON body or a
// server-sent event stream. Other calls (listing models, counting tokens,
// embeddings, refusals of the gateway's) are named in the notes.
//
//   - System prompts (Anthropic's system, Responses' instructions, system
//     and developer messages) become system steps, user messages user
//     steps, each the first time a request carries it. A request re-sends
//     the whole conversation: a message is new unless the same
//     conversation, up to and including it, was sent (or answered) before.
//     Each message is chained onto the ones before it by a digest of its
//     role, text and tool results (for the assistant: its tool call ids,
//     or its text), leaving out what clients change between requests
//     (cache_control, signatures, reasoning), so several conversations at
//     once (subagents, side queries) dedupe each on its own, and a
//     conversation whose earlier messages the agent rewrote shows them
//     again, as the model saw them. A system prompt outside the messages
//     is stepped once per distinct text.
//   - Each model response becomes an agent step (llm_call_count 1): its
//     text, reasoning where the provider sends it (Anthropic's thinking,
//     Responses' reasoning summaries and text, Chat's reasoning_content),
//     and tool calls with their ids, names and arguments (a JSON object;
//     arguments that are not one, say cut short, are kept as text in the
//     call's extra). The model is the request's, else the response's; the
//     reasoning effort the request's. Metrics are the usage the provider
//     reported, as the gateway metered it (gateway.Exchange.Usage):
//     prompt_tokens every input token, cached_tokens those read from the
//     cache, cache writes in extra; final_metrics sums the steps.
//   - Tool results a later request carries back (Anthropic's tool_result
//     blocks, Responses' *_call_output items, Chat's tool messages) become
//     observation results on the step that made the call, linked by its
//     id, once each. A result for an id no step made gets a user step of
//     its own, the id in its extra.
//   - An assistant message a request carries that no recorded response
//     made (history the agent's program wrote itself) becomes an agent step
//     with llm_call_count 0 and extra.from_request: ATIF's mark for a step
//     no model inference produced.
//
// Every step's extra names the call (its seq in the recording, and the
// gateway) that first carried it, so a step can be checked against the
// recording's bytes. Images, documents and files are not copied: a text
// part names each, with the SHA-256 of its data as sent. Timestamps are not
// written: the recording has none, and the same recording must make the
// same bytes.
//
// # Hostile input
//
// Every byte of a recording came from the agent or the upstream. This
// package must never panic on one, nor invent a step: a body it cannot
// read, a stream that stops before its end (a cut, or no final event), a
// JSON field of an unexpected type, a tool call id repeated within a step,
// a recording that stopped at its limits, text past the 64 MiB a
// trajectory holds (the agent chooses its size), each is said in the
// trajectory's notes (and extra.complete is false for a loss), and
// Build fails only when no call is a model turn that makes a step (ErrNoTurns). Output is
// deterministic: the same calls give the same bytes (Encode).
package trajectory
