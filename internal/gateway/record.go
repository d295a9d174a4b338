package gateway

import (
	"cmp"
	"slices"
	"time"
)

// Call is the record of one request the agent made through a Gateway,
// reported once the response has been relayed in full, or has failed, or was
// refused. Every string in it but Gateway and the digests comes from the agent
// or the upstream: treat it as data.
//
// Token counts are normalised across providers, and zero where the response
// reported none (an error, a body that is not JSON, a body or event larger
// than the parser reads):
//   - InputTokens: every prompt token, cached or not (OpenAI's prompt_tokens
//     or input_tokens; Anthropic's input_tokens plus its cache read and
//     cache creation tokens);
//   - CacheReadTokens: how many of those were read from the provider's cache;
//   - CacheWriteTokens: how many were written to it (Anthropic);
//   - OutputTokens: completion or output tokens, reasoning included;
//   - TotalTokens: as reported, else InputTokens+OutputTokens.
type Call struct {
	Time    time.Time `json:"time"`    // when the request arrived
	Gateway string    `json:"gateway"` // Spec.Name
	Method  string    `json:"method"`
	Path    string    `json:"path"` // the request target's path, or the whole target when refused for it (at most 2 KiB)
	// Model is the request body's "model", else the response's.
	Model  string `json:"model,omitempty"`
	Status int    `json:"status"` // sent to the agent

	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	TotalTokens      int64 `json:"total_tokens"`

	// Latency runs from the request's arrival to the last byte relayed.
	Latency time.Duration `json:"latency_ns"`
	// RequestSHA256 is the hex SHA-256 of the request body as the agent sent
	// it; empty when the request was refused before its body was read.
	RequestSHA256 string `json:"request_sha256,omitempty"`
	// ResponseSHA256 is the hex SHA-256 of the response body as the agent was
	// sent it (decoded, scrubbed; the gateway's own error bodies included).
	ResponseSHA256 string `json:"response_sha256"`
	BytesUp        int64  `json:"bytes_up"`   // request body bytes read from the agent
	BytesDown      int64  `json:"bytes_down"` // response body bytes written to the agent
	// Error says what went wrong: why the gateway refused or failed the
	// request, or how the relay was cut ("client went away", "cut by Close",
	// an upstream read error). Empty when the response was relayed whole,
	// whatever its status.
	Error string `json:"error,omitempty"`
}

// Usage sums the calls of one gateway for one model (Model is "" for calls
// that named none).
type Usage struct {
	Gateway string `json:"gateway"`
	Model   string `json:"model"`
	Calls   int    `json:"calls"`
	// Failed counts calls with an Error or a status of 400 or more.
	Failed int `json:"failed"`

	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	BytesUp          int64 `json:"bytes_up"`
	BytesDown        int64 `json:"bytes_down"`
}

// maxModels bounds how many models Usage tells apart: the agent names them.
// Calls for further models are summed under otherModels.
const (
	maxModels   = 1000
	otherModels = "(other models)"
)

func (u *Usage) add(c *Call) {
	u.Calls++
	if c.Error != "" || c.Status >= 400 {
		u.Failed++
	}
	u.InputTokens = addSat(u.InputTokens, c.InputTokens)
	u.OutputTokens = addSat(u.OutputTokens, c.OutputTokens)
	u.CacheReadTokens = addSat(u.CacheReadTokens, c.CacheReadTokens)
	u.CacheWriteTokens = addSat(u.CacheWriteTokens, c.CacheWriteTokens)
	u.TotalTokens = addSat(u.TotalTokens, c.TotalTokens)
	u.BytesUp = addSat(u.BytesUp, c.BytesUp)
	u.BytesDown = addSat(u.BytesDown, c.BytesDown)
}

// addSat adds non-negative a and b, stopping at the largest int64.
func addSat(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// Usage returns the totals of the calls recorded so far, one per model,
// sorted by model. Safe to call at any time, also after Close.
func (g *Gateway) Usage() []Usage {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Usage, 0, len(g.usage))
	for _, u := range g.usage {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b Usage) int { return cmp.Compare(a.Model, b.Model) })
	return out
}

// tally adds c to the totals.
func (g *Gateway) tally(c *Call) {
	g.mu.Lock()
	defer g.mu.Unlock()
	model := c.Model
	u := g.usage[model]
	if u == nil && len(g.usage) >= maxModels {
		model = otherModels
		u = g.usage[model]
	}
	if u == nil {
		u = &Usage{Gateway: g.spec.Name, Model: model}
		g.usage[model] = u
	}
	u.add(c)
}
