// Package atiftest validates ATIF trajectories, for tests: against the
// ATIF-v1.7 JSON Schema beside it (see README.md: written from Harbor's
// RFC 0001 and Pydantic models, as Harbor publishes none) and the rules a
// schema cannot state. It is never linked into the proctor binary.
package atiftest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed atif-v1.7.schema.json
var schemaJSON []byte

// SchemaURL is the schema's $id.
const SchemaURL = "https://proctor-sandbox.github.io/schemas/atif-v1.7.schema.json"

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(SchemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(SchemaURL)
})

// Validate checks that data is one ATIF-v1.7 trajectory: the schema, then
// Harbor's Trajectory validators. It returns what is wrong, or nil.
func Validate(data []byte) error {
	s, err := compiled()
	if err != nil {
		return fmt.Errorf("the ATIF schema: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.Validate(doc); err != nil {
		return err
	}
	return checkInvariants(data)
}

// checkInvariants checks what Harbor's Trajectory validators check beyond
// the fields: step ids run from 1 in order, every observation result's
// source_call_id names a tool call of its own step, and tool call ids are
// not repeated within a step.
func checkInvariants(data []byte) error {
	var tr struct {
		Steps []struct {
			StepID    int `json:"step_id"`
			ToolCalls []struct {
				ID string `json:"tool_call_id"`
			} `json:"tool_calls"`
			Observation *struct {
				Results []struct {
					SourceCallID *string `json:"source_call_id"`
				} `json:"results"`
			} `json:"observation"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(data, &tr); err != nil {
		return err
	}
	for i, s := range tr.Steps {
		if s.StepID != i+1 {
			return fmt.Errorf("steps[%d].step_id: expected %d (sequential from 1), got %d", i, i+1, s.StepID)
		}
		ids := map[string]bool{}
		for _, c := range s.ToolCalls {
			if ids[c.ID] {
				return fmt.Errorf("step %d has duplicate tool_call_id %q", s.StepID, c.ID)
			}
			ids[c.ID] = true
		}
		if s.Observation == nil {
			continue
		}
		for _, r := range s.Observation.Results {
			if r.SourceCallID != nil && !ids[*r.SourceCallID] {
				return fmt.Errorf("observation result references source_call_id %q which is not found in step %d's tool_calls", *r.SourceCallID, s.StepID)
			}
		}
	}
	return nil
}
