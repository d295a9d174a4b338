package tooling

import "testing"

// mapEnv is an environment of the given paths (directories end in "/"),
// everything else absent.
type mapEnv map[string]Kind

func (e mapEnv) Lstat(p string) (Kind, string, error) {
	if p == "/" {
		return Dir, "", nil
	}
	return e[p], "", nil
}

// A path the grader looked for in a directory it then made for itself is
// still the tooling's when it looked before it wrote there and never wrote
// it: go reads $HOME/.config/go/env, then makes $HOME/.config for its
// telemetry. What it looked up on the way to making the directory, and
// once it had, is its own.
func TestProbedBeforeMade(t *testing.T) {
	env := mapEnv{"/root": Dir, "/usr": Dir, "/usr/bin": Dir, "/usr/bin/go": File}
	tel := "/root/.config/go/telemetry/local/"
	p, err := Learn(Input{Env: env, CodeRoots: []string{"/app"}, Accesses: []Access{
		{Op: "exec", Path: "/usr/bin/go"},
		{Op: "open", Path: "/root/.config/go/env"},
		{Op: "open", Path: "/root/.config/go/telemetry/mode"},
		{Op: "open", Path: tel + "weekends"},
		{Op: "stat", Path: "/root/.config/go/telemetry/local"},
		{Op: "stat", Path: "/root/.config"},
		{Op: "open", Path: tel + "weekends", Write: true},
		{Op: "stat", Path: tel + "upload.token"},
		{Op: "open", Path: tel + "upload.token", Write: true},
		{Op: "stat", Path: "/root/.config/go/telemetry/debug"},
		{Op: "open", Path: "/root/.config/go/env"}, // a second go
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path      string
		violation bool
		leftOut   bool
	}{
		{"/root/.config", false, false}, // carried: the env file beneath is judged
		{"/root/.config/go", false, false},
		{"/root/.config/go/env", true, false},
		{"/root/.config/go/telemetry/mode", true, false},
		{tel + "weekends", false, true},
		{tel + "upload.token", false, true},
		{"/root/.config/go/telemetry/debug", false, true},
	} {
		d := p.Check(Change{Path: c.path, New: true})
		if (d.Violation != "") != c.violation || (d.LeftOut != "") != c.leftOut {
			t.Errorf("Check(%s) = %+v: want violation %t, left out %t (probed %q, made %q)", c.path, d, c.violation, c.leftOut, p.Probed, p.Made)
		}
	}
}
