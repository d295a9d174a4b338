package trajectory

import (
	"bytes"
	"encoding/json"
)

// Version is the ATIF version this package writes.
const Version = "ATIF-v1.7"

// Step sources.
const (
	SourceSystem = "system"
	SourceUser   = "user"
	SourceAgent  = "agent"
)

// A Trajectory is an ATIF document (Harbor's RFC 0001): the root object.
// Build makes one; a Trajectory is a plain value, not safe for concurrent
// modification. Every string in it came from the agent or its model.
type Trajectory struct {
	SchemaVersion string        `json:"schema_version"`
	SessionID     string        `json:"session_id,omitempty"`
	Agent         Agent         `json:"agent"`
	Steps         []Step        `json:"steps"`
	Notes         string        `json:"notes,omitempty"`
	FinalMetrics  *FinalMetrics `json:"final_metrics,omitempty"`
	Extra         *Extra        `json:"extra,omitempty"`
}

// Agent is ATIF's AgentSchema.
type Agent struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	ModelName string `json:"model_name,omitempty"`
}

// Extra is the trajectory's extra: where it came from.
type Extra struct {
	// Producer says the trajectory was read from the model gateway's
	// recording, not written by the agent.
	Producer string `json:"producer"`
	// RecordingCalls is how many calls the recording held; ModelTurns how
	// many of them were model turns read into steps.
	RecordingCalls int `json:"recording_calls"`
	ModelTurns     int `json:"model_turns"`
	// Complete is false when calls are missing from the recording (it
	// stopped at a limit) or a response was cut: Notes say which.
	Complete bool `json:"complete"`
}

// Step is ATIF's StepObject.
type Step struct {
	StepID           int          `json:"step_id"`
	Source           string       `json:"source"`
	ModelName        string       `json:"model_name,omitempty"`
	ReasoningEffort  string       `json:"reasoning_effort,omitempty"`
	Message          Content      `json:"message"`
	ReasoningContent string       `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall   `json:"tool_calls,omitempty"`
	Observation      *Observation `json:"observation,omitempty"`
	Metrics          *Metrics     `json:"metrics,omitempty"`
	// LLMCallCount is 1 on an agent step made from a model's response, 0
	// on one the agent's program wrote into a request itself (history the
	// recording holds no response for); unset on other steps.
	LLMCallCount *int       `json:"llm_call_count,omitempty"`
	Extra        *StepExtra `json:"extra,omitempty"`
}

// StepExtra ties a step to the recording.
type StepExtra struct {
	// RecordingCall is the seq of the call that first carried the step: the
	// request holding the message, or the response the model gave.
	RecordingCall int    `json:"recording_call"`
	Gateway       string `json:"gateway,omitempty"`
	// StopReason is the provider's, as it gave it (stop_reason,
	// finish_reason, a Responses status).
	StopReason string `json:"stop_reason,omitempty"`
	// Truncated: the response was cut or its stream did not end; the step
	// holds what arrived.
	Truncated bool `json:"truncated,omitempty"`
	// FromRequest: an agent message the agent's program sent in a request
	// that no recorded response had made.
	FromRequest bool `json:"from_request,omitempty"`
	// Reasoning is the reasoning such a message carried (ATIF allows no
	// reasoning_content on a step no inference made).
	Reasoning string `json:"reasoning,omitempty"`
}

// ContentPart is ATIF's ContentPartSchema; only text parts are written
// (an image is named by a text part, see the package documentation).
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Content is a message or an observation's content: a JSON string when it
// is one text part (or none: ""), else an array of ContentParts, so that
// the parts a request held are kept apart as they were.
type Content []ContentPart

// MarshalJSON writes c as ATIF has it.
func (c Content) MarshalJSON() ([]byte, error) {
	switch len(c) {
	case 0:
		return []byte(`""`), nil
	case 1:
		return marshal(c[0].Text)
	}
	return marshal([]ContentPart(c))
}

// ToolCall is ATIF's ToolCallSchema.
type ToolCall struct {
	ToolCallID   string `json:"tool_call_id"`
	FunctionName string `json:"function_name"`
	// Arguments is a JSON object, compact, as the model wrote it; {} when
	// what it wrote was not one (then in Extra).
	Arguments json.RawMessage `json:"arguments"`
	Extra     *ToolCallExtra  `json:"extra,omitempty"`
}

// ToolCallExtra keeps arguments that were not a JSON object.
type ToolCallExtra struct {
	RawArguments   string `json:"raw_arguments"`
	ArgumentsError string `json:"arguments_error"`
}

// Observation is ATIF's ObservationSchema.
type Observation struct {
	Results []ObservationResult `json:"results"`
}

// ObservationResult is ATIF's ObservationResultSchema.
type ObservationResult struct {
	// SourceCallID is the tool call of this step the result answers;
	// empty when no step made the call (then Extra.ToolCallID names it).
	SourceCallID string      `json:"source_call_id,omitempty"`
	Content      Content     `json:"content"`
	Extra        ResultExtra `json:"extra"`
}

// ResultExtra ties a tool result to the request that carried it back.
type ResultExtra struct {
	RecordingCall int    `json:"recording_call"`
	IsError       bool   `json:"is_error,omitempty"`
	ToolCallID    string `json:"tool_call_id,omitempty"` // an id no step made
}

// Metrics is ATIF's MetricsSchema, from the usage the provider reported.
type Metrics struct {
	// PromptTokens counts every input token, cached or not (ATIF's
	// meaning, and the gateway's InputTokens); CachedTokens those read
	// from the provider's cache.
	PromptTokens     int64         `json:"prompt_tokens"`
	CompletionTokens int64         `json:"completion_tokens"`
	CachedTokens     int64         `json:"cached_tokens"`
	Extra            *MetricsExtra `json:"extra,omitempty"`
}

// MetricsExtra holds what ATIF has no field for.
type MetricsExtra struct {
	// CacheCreationInputTokens are input tokens written to the cache
	// (Anthropic), part of PromptTokens.
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// FinalMetrics is ATIF's FinalMetricsSchema: sums over the steps.
type FinalMetrics struct {
	TotalPromptTokens     int64              `json:"total_prompt_tokens"`
	TotalCompletionTokens int64              `json:"total_completion_tokens"`
	TotalCachedTokens     int64              `json:"total_cached_tokens"`
	TotalSteps            int                `json:"total_steps"`
	Extra                 *FinalMetricsExtra `json:"extra,omitempty"`
}

// FinalMetricsExtra holds what ATIF has no field for.
type FinalMetricsExtra struct {
	TotalCacheCreationInputTokens int64 `json:"total_cache_creation_input_tokens"`
}

// Encode writes t as JSON, indented by two spaces, ending in a newline,
// without HTML escapes: the same Trajectory always makes the same bytes.
func (t *Trajectory) Encode() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(t); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escapes or a newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
