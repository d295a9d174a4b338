package tooling

import (
	"bufio"
	"bytes"
	"regexp"
	"slices"
	"strings"
)

// Reader is an Env that can also read a pristine file whole, up to max
// bytes: the source of the tooling's Python modules, for the imports they
// try (ImportsOf).
type Reader interface {
	Env
	Read(p string, max int) ([]byte, error)
}

// maxSource bounds the bytes of one module read for its imports.
const maxSource = 4 << 20

// Imports are the top-level module names a Python source imports.
type Imports struct {
	// Module are imported as the module runs, at its top level, in a
	// class body or in a try/if block there: tried whenever the module is
	// loaded, found or not. A name not found leaves no trace in a trace
	// of system calls (Python's import system lists a directory once and
	// looks names up in memory), so they are read from the source.
	Module []string
	// Lazy are imported inside functions (or by a literal
	// importlib.import_module / __import__ call), or under a test of the
	// Python version: tried only when that code runs. Imports under "if
	// TYPE_CHECKING:" are never run, and not listed.
	Lazy []string
	// PluginGroups are the entry-point groups the source loads plugins
	// from.
	PluginGroups []string
}

var (
	importLine   = regexp.MustCompile(`^import\s+(.+)$`)
	fromLine     = regexp.MustCompile(`^from\s+([A-Za-z_][A-Za-z0-9_]*)(?:\.[A-Za-z0-9_.]*)?\s+import\b`)
	dynamicCall  = regexp.MustCompile(`(?:import_module|__import__)\(\s*["']([A-Za-z_][A-Za-z0-9_]*)`)
	identifier   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	defLine      = regexp.MustCompile(`^(?:async\s+)?def\s`)
	typingBlock  = regexp.MustCompile(`^if\s+(?:typing\.|t\.)?TYPE_CHECKING\s*:`)
	versionBlock = regexp.MustCompile(`^(?:if|elif)\s+.*\bsys\.version_info\b.*:\s*(?:#.*)?$`)
	// pluginGroup finds the entry-point groups a source loads plugins
	// from (pluggy's load_setuptools_entrypoints, importlib.metadata's
	// entry_points(group=...) and select(group=...)).
	pluginGroup = regexp.MustCompile(`(?:load_setuptools_entrypoints\(|entry_points\([^)]*group\s*=\s*|\.select\(\s*group\s*=\s*)["']([A-Za-z0-9_.\-]+)["']`)
)

// ImportsOf reads the imports of a Python source, line by line: enough
// for import statements, which Python writes one to a line; triple-quoted
// strings are skipped, relative imports ignored. It over-approximates
// (a name in a branch never taken still counts), which is the safe side
// for a freeze.
func ImportsOf(src []byte) Imports {
	var im Imports
	seenM, seenL := map[string]bool{}, map[string]bool{}
	add := func(name string, lazy bool) {
		if !identifier.MatchString(name) || name == "__future__" {
			return
		}
		if lazy {
			if !seenL[name] {
				seenL[name] = true
				im.Lazy = append(im.Lazy, name)
			}
			return
		}
		if !seenM[name] {
			seenM[name] = true
			im.Module = append(im.Module, name)
		}
	}
	// blocks are the enclosing blocks that change what an import means:
	// a def (lazy), an "if TYPE_CHECKING:" (never run), an "if
	// sys.version_info ...:" (run on some versions only: lazy).
	type block struct {
		indent int
		kind   string
	}
	var blocks []block
	inString := "" // the open triple quote, or ""
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		raw := sc.Text()
		if inString != "" {
			if strings.Count(raw, inString)%2 == 1 {
				inString = ""
			}
			continue
		}
		line := strings.TrimLeft(raw, " \t")
		if line == "" || line[0] == '#' {
			continue
		}
		indent := len(raw) - len(line)
		for len(blocks) > 0 && indent <= blocks[len(blocks)-1].indent {
			top := blocks[len(blocks)-1]
			if indent == top.indent && top.kind != "def" && (strings.HasPrefix(line, "else") || strings.HasPrefix(line, "elif")) {
				// The other branch: run when TYPE_CHECKING is false (as
				// ever); on the other versions (lazy still).
				if top.kind == "typing" {
					blocks = blocks[:len(blocks)-1]
				}
				break
			}
			blocks = blocks[:len(blocks)-1]
		}
		lazy, never := false, false
		for _, b := range blocks {
			switch b.kind {
			case "def", "version":
				lazy = true
			case "typing":
				never = true
			}
		}
		if !never {
			for _, m := range dynamicCall.FindAllStringSubmatch(line, -1) {
				add(m[1], true)
			}
		}
		switch {
		case defLine.MatchString(line):
			blocks = append(blocks, block{indent, "def"})
		case typingBlock.MatchString(line):
			blocks = append(blocks, block{indent, "typing"})
		case versionBlock.MatchString(line):
			blocks = append(blocks, block{indent, "version"})
		case never:
		case strings.HasPrefix(line, "import "):
			if m := importLine.FindStringSubmatch(cutComment(line)); m != nil {
				for _, part := range strings.Split(strings.Trim(m[1], "()\\ "), ",") {
					name, _, _ := strings.Cut(strings.TrimSpace(part), " ")
					top, _, _ := strings.Cut(name, ".")
					add(top, lazy)
				}
			}
		case strings.HasPrefix(line, "from "):
			if m := fromLine.FindStringSubmatch(line); m != nil {
				add(m[1], lazy)
			}
		}
		for _, q := range []string{`"""`, `'''`} {
			if strings.Count(line, q)%2 == 1 {
				inString = q
				break
			}
		}
	}
	for _, m := range pluginGroup.FindAllSubmatch(src, -1) {
		if g := string(m[1]); !slices.Contains(im.PluginGroups, g) {
			im.PluginGroups = append(im.PluginGroups, g)
		}
	}
	return im
}

func cutComment(s string) string {
	s, _, _ = strings.Cut(s, "#")
	return strings.TrimSpace(s)
}
