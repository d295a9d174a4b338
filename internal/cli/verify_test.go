package cli

import (
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

// The timeline must tell the verdict's story; a bundle whose signer wrote a
// verdict its own timeline contradicts is refused.
func TestTimelineAgrees(t *testing.T) {
	vio := trial.Violation{Kind: trial.ViolationProtected, Path: "/app/conftest.py", Detail: "write"}
	build := func(events ...[2]any) *bundle.Payload {
		var tl bundle.Timeline
		for _, e := range events {
			tl.Append(e[0].(string), e[1], time.Unix(0, 0))
		}
		return &bundle.Payload{Timeline: tl.Events()}
	}
	verdict := &trial.Verdict{Status: trial.StatusCompromised, Violations: []trial.Violation{vio}}
	good := build([2]any{"trial.start", map[string]any{}}, [2]any{"violation", vio},
		[2]any{"verdict", map[string]any{"status": "compromised", "passed": false, "reward": 0}})
	if err := timelineAgrees(good, verdict); err != nil {
		t.Fatalf("a consistent bundle: %v", err)
	}
	cases := map[string]*bundle.Payload{
		"violation missing": build([2]any{"verdict", map[string]any{"status": "compromised", "passed": false, "reward": 0}}),
		"other violation": build([2]any{"violation", trial.Violation{Kind: "x", Path: "/y"}},
			[2]any{"verdict", map[string]any{"status": "compromised", "passed": false, "reward": 0}}),
		"verdict event differs": build([2]any{"violation", vio},
			[2]any{"verdict", map[string]any{"status": "clean", "passed": true, "reward": 1}}),
		"no verdict event": build([2]any{"violation", vio}),
		"not last": build([2]any{"violation", vio},
			[2]any{"verdict", map[string]any{"status": "compromised", "passed": false, "reward": 0}}, [2]any{"agent.start", map[string]any{}}),
	}
	for name, p := range cases {
		if err := timelineAgrees(p, verdict); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
