package recipe

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuiltinRecipes(t *testing.T) {
	c, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"claude-code", "codex", "gemini-cli", "qwen-code", "opencode"} {
		r, err := c.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if r.Package.Integrity == "" {
			t.Errorf("%s: the shipped recipe pins no integrity", name)
		}
	}
	for _, name := range []string{"claude-code", "codex", "qwen-code", "opencode"} {
		r, _ := c.Lookup(name)
		if err := r.Usable(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	g, _ := c.Lookup("gemini-cli")
	if err := g.Usable(); !errors.Is(err, ErrProvider) || !strings.Contains(err.Error(), "not one the model gateway relays") {
		t.Errorf("gemini-cli: %v; want refused with the reason", err)
	}
	if _, err := c.Lookup("nope"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "claude-code") {
		t.Errorf("unknown name: %v", err)
	}
}

const good = `
name = "x"
providers = ["openai"]
args = ["run", "{instruction}"]
[package]
npm = "@scope/x"
version = "1.2.3"
bin = "node_modules/@scope/x/bin/x"
`

func TestParseRefuses(t *testing.T) {
	if _, err := Parse([]byte(good), "good.toml"); err != nil {
		t.Fatalf("good recipe: %v", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"latest", `version = "1.2.3"`, `version = "latest"`, "package.version"},
		{"caret", `version = "1.2.3"`, `version = "^1.2.3"`, "not pinned"},
		{"x range", `version = "1.2.3"`, `version = "1.x"`, "not pinned"},
		{"partial", `version = "1.2.3"`, `version = "1.2"`, "not pinned"},
		{"range", `version = "1.2.3"`, `version = ">=1.2.3"`, "not pinned"},
		{"url", `version = "1.2.3"`, `version = "https://example.com/x.tgz"`, "not pinned"},
		{"file", `version = "1.2.3"`, `version = "file:../x"`, "not pinned"},
		{"empty", `version = "1.2.3"`, `version = ""`, "pin the exact version"},
		{"unknown key", `[package]`, "colour = \"red\"\n[package]", "unknown key colour"},
		{"no instruction", `args = ["run", "{instruction}"]`, `args = ["run"]`, "no {instruction}"},
		{"bin escapes", `bin = "node_modules/@scope/x/bin/x"`, `bin = "../../usr/bin/sh"`, "package.bin"},
		{"bin absolute", `bin = "node_modules/@scope/x/bin/x"`, `bin = "/bin/sh"`, "package.bin"},
		{"log outside tmp", `[package]`, "logs = [\"/root/.claude\"]\n[package]", "under /tmp"},
		{"log not clean", `[package]`, "logs = [\"/tmp/../root\"]\n[package]", "under /tmp"},
		{"unknown provider", `providers = ["openai"]`, `providers = ["acme"]`, "unknown"},
		{"no provider", `providers = ["openai"]`, `providers = []`, "providers"},
		{"bad integrity", `[package]`, "[package]\nintegrity = \"sha1-abc\"", "package.integrity"},
		{"api key env", `[package]`, "[env]\nOPENAI_API_KEY = \"sk-real\"\n[package]", "set by Proctor"},
		{"bad var", `args = ["run", "{instruction}"]`, `args = ["run ${A B}", "{instruction}"]`, "not a variable name"},
		{"open var", `args = ["run", "{instruction}"]`, `args = ["run ${A", "{instruction}"]`, "unclosed"},
		{"bad npm name", `npm = "@scope/x"`, `npm = "../x"`, "package.npm"},
		{"bad name", `name = "x"`, `name = "a b"`, "name"},
		{"bad replay pattern", `[package]`, "replay_ignore = [\"^(x$\"]\n[package]", "replay_ignore[0]"},
		{"unanchored replay pattern", `[package]`, "replay_ignore = [\"Chunk\"]\n[package]", "anchor it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(good, tc.from, tc.to, 1)
			if src == good {
				t.Fatalf("the case changes nothing")
			}
			_, err := Parse([]byte(src), "r.toml")
			if !errors.Is(err, ErrRecipe) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v; want an %v naming %q", err, ErrRecipe, tc.want)
			}
		})
	}
}

func TestProvider(t *testing.T) {
	r, err := Parse([]byte(strings.Replace(good, `providers = ["openai"]`, `providers = ["openai", "anthropic"]`, 1)), "r.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ model, provider, bare, err string }{
		{"openai/gpt-5", "openai", "gpt-5", ""},
		{"anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", ""},
		{"gpt-5", "openai", "gpt-5", ""},
		{"openai/org/model", "openai", "org/model", ""},
		{"google/gemini-2.5-pro", "", "", "not one the model gateway relays"},
		{"acme/x", "", "", "unknown"},
		{"openai/", "", "", "non-empty model"},
		{"openai/a\nb", "", "", "non-empty model"},
	} {
		p, bare, err := r.Provider(tc.model)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v; want an error with %q", tc.model, err, tc.err)
			}
			continue
		}
		if err != nil || p.Name != tc.provider || bare != tc.bare {
			t.Errorf("%q: %s %q %v; want %s %q", tc.model, p.Name, bare, err, tc.provider, tc.bare)
		}
	}
	only, _ := Parse([]byte(good), "r.toml")
	if _, _, err := only.Provider("anthropic/claude"); !errors.Is(err, ErrProvider) {
		t.Errorf("a provider the recipe does not take: %v", err)
	}
}

// The command's words reach the program exactly, whatever a model name or
// a recipe's text holds: nothing is read as shell syntax.
func TestCommandQuoting(t *testing.T) {
	dir := t.TempDir()
	instr := filepath.Join(dir, "instruction.md")
	hostile := "it's $(touch " + dir + "/pwned) `touch " + dir + "/pwned2` \"q\" \\ ; done"
	if err := os.WriteFile(instr, []byte(hostile+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Recipe{Name: "x", Providers: []string{"openai"}, Args: []string{
		"{instruction}", "--model", "{model}", "-c", `p={name="x", base_url="${BASE}/v1"}`,
		"{provider}:{model}", "{layer}/bin", "a'b", "$HOME", "{unknown}", "",
	}, Env: map[string]string{"A_URL": "${BASE}/x", "LIT": "$(touch " + dir + "/pwned3)"}}
	model := "gpt-5'; touch " + dir + "/pwned4; '"
	var words []string
	for _, a := range r.Args {
		words = append(words, r.word(a, providers["openai"], model, instr))
	}
	script := "printf '%s\\n' " + strings.Join(words, " ")
	out, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), "BASE=http://127.0.0.1:4100")
	out, err = cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		hostile, "--model", model, "-c", `p={name="x", base_url="http://127.0.0.1:4100/v1"}`,
		"openai:" + model, LayerPath + "/bin", "a'b", "$HOME", "{unknown}", "",
	}
	if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("words:\n%q\nwant\n%q", got, want)
	}
	full := r.Command(providers["openai"], model, instr)
	if !strings.Contains(full, "export A_URL=\"${BASE}\"'/x'") {
		t.Errorf("env not exported with its variable expanded: %s", full)
	}
	// Run the environment part: the literal value is not executed.
	envPart := full[:strings.Index(full, "exec ")]
	if err := exec.Command("/bin/sh", "-c", envPart+"true").Run(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"pwned", "pwned2", "pwned3", "pwned4"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s: the shell ran text of the recipe, model or instruction", f)
		}
	}
}

func TestDigest(t *testing.T) {
	a, _ := Parse([]byte(good), "a.toml")
	b, _ := Parse([]byte(good), "b.toml")
	if a.Digest() != b.Digest() || !strings.HasPrefix(a.Digest(), "sha256:") {
		t.Errorf("the same recipe from two files: %s %s", a.Digest(), b.Digest())
	}
	c, _ := Parse([]byte(strings.Replace(good, "1.2.3", "1.2.4", 1)), "c.toml")
	if c.Digest() == a.Digest() {
		t.Error("another version, the same digest")
	}
}

func TestCatalogWith(t *testing.T) {
	base, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	c, err := base.With(map[string]any{"mine": map[string]any{
		"providers": []any{"openai"}, "args": []any{"{instruction}"},
		"package": map[string]any{"npm": "mine", "version": "0.1.0", "bin": "node_modules/mine/cli"},
	}}, "cfg.toml")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Lookup("mine"); err != nil || !strings.Contains(r.Source, "cfg.toml") {
		t.Fatalf("mine: %v %v", r, err)
	}
	if _, err := base.Lookup("mine"); err == nil {
		t.Error("With changed the catalog it was called on")
	}
	_, err = base.With(map[string]any{"bad": map[string]any{
		"providers": []any{"openai"}, "args": []any{"{instruction}"},
		"package": map[string]any{"npm": "mine", "version": "latest", "bin": "x"},
	}}, "cfg.toml")
	if err == nil || !strings.Contains(err.Error(), "cfg.toml [agents.bad]") || !strings.Contains(err.Error(), "not pinned") {
		t.Errorf("an unpinned user recipe: %v", err)
	}
}

// A pinned recipe pins what it runs: the integrity of the package its
// executable lies in (Claude Code's and Codex's platform packages, not
// only their launchers), or a registry could serve another binary under
// the pinned version and the install would take it.
func TestShippedRecipesPinTheirExecutable(t *testing.T) {
	c, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range c.Names() {
		r, _ := c.Lookup(name)
		rest, ok := strings.CutPrefix(r.Package.Bin, "node_modules/")
		if !ok {
			t.Errorf("%s: bin %s is not in a package", name, r.Package.Bin)
			continue
		}
		parts := strings.SplitN(rest, "/", 3)
		pkg := parts[0]
		if strings.HasPrefix(pkg, "@") && len(parts) > 1 {
			pkg += "/" + parts[1]
		}
		if r.Pinned()[pkg] == "" {
			t.Errorf("%s: runs %s from %s, whose integrity it does not pin (it pins %v)", name, r.Package.Bin, pkg, r.Pinned())
		}
	}
}

// A recipe that pins its package must pin the one its executable lies in.
func TestValidateBinPinned(t *testing.T) {
	r := &Recipe{Name: "x", Providers: []string{"openai"}, Args: []string{"{instruction}"},
		Package: Package{NPM: "x", Version: "1.0.0", Integrity: "sha512-" + strings.Repeat("A", 86) + "==", Bin: "node_modules/x-linux-x64/bin/x"}}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "package.bin") {
		t.Errorf("an executable in an unpinned package: %v", err)
	}
	r.Package.Pins = map[string]string{"x-linux-x64": r.Package.Integrity}
	if err := r.Validate(); err != nil {
		t.Errorf("pinned: %v", err)
	}
}
