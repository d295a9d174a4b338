package agentlayer

import (
	"errors"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/recipe"
)

const pinned = "sha512-KhzYlkKPxoNssR8CEm45IjqnFWn7UtlF4CiD3tOJPea51xBs7MaHy0UQG9GSbCqk6Lrjn5QdJDV0QD1/FgWlGw=="
const other = "sha512-2ZP53HuNspqL1lCX9Xc2XfoSq26VjjQ7XC08dTnkpetzH0kkAN1TTM3K1YOSwzAqikCdjQUzMV0haZmdxhPhjg=="

// What npm resolved is checked against the recipe: a registry that served
// other bytes under the pinned version, another version, a link or a
// package without integrity are refused.
func TestPackagesOf(t *testing.T) {
	r := &recipe.Recipe{Name: "codex", Package: recipe.Package{NPM: "@openai/codex", Version: "0.169.0", Integrity: pinned}}
	lock := func(version, integrity, extra string) []byte {
		return []byte(`{"lockfileVersion": 3, "packages": {"": {},
			"node_modules/@openai/codex": {"version": "` + version + `", "integrity": "` + integrity + `"},
			"node_modules/@openai/codex-linux-x64": {"name": "@openai/codex", "version": "0.169.0-linux-x64", "integrity": "` + other + `", "optional": true}` + extra + `}}`)
	}
	all := func(string) bool { return true }
	pkgs, err := packagesOf(lock("0.169.0", pinned, ""), r, all)
	if err != nil || len(pkgs) != 2 || pkgs[0].Name != "@openai/codex" || pkgs[1].Name != "@openai/codex-linux-x64" {
		t.Fatalf("%+v %v", pkgs, err)
	}
	only := func(p string) bool { return !strings.HasSuffix(p, "-linux-x64") }
	if pkgs, _ := packagesOf(lock("0.169.0", pinned, ""), r, only); len(pkgs) != 1 {
		t.Errorf("a package of another platform, not installed, is listed: %+v", pkgs)
	}
	var ie *IntegrityError
	if _, err := packagesOf(lock("0.169.0", other, ""), r, all); !errors.As(err, &ie) || !errors.Is(err, ErrLayer) {
		t.Errorf("other bytes under the pinned version: %v", err)
	}
	for _, tc := range []struct{ name, lock, want string }{
		{"version", string(lock("0.169.1", pinned, "")), "installed 0.169.1"},
		{"link", string(lock("0.169.0", pinned, `, "node_modules/x": {"link": true, "integrity": "`+other+`"}`)), "a link"},
		{"no integrity", string(lock("0.169.0", pinned, `, "node_modules/x": {"version": "1.0.0"}`)), "no integrity"},
		{"outside", string(lock("0.169.0", pinned, `, "../x": {"version": "1.0.0", "integrity": "`+other+`"}`)), "not under node_modules"},
		{"missing", `{"lockfileVersion": 3, "packages": {"": {}}}`, "was not installed"},
		{"old lock", `{"lockfileVersion": 1, "dependencies": {}}`, "lockfileVersion 1"},
		{"not json", `{`, "package-lock.json"},
	} {
		if _, err := packagesOf([]byte(tc.lock), r, all); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
	}
}
