package answerscan

import (
	"bytes"
	"math"
	"path"
	"strings"
)

// The fragment rule: which lines of the hidden material are distinctive
// enough to search for. A line is a fragment when, read as tokens, it
//
//   - is not boilerplate (boilerplate below): a comment, an import, a
//     shebang or shell option, a package install or download, the harness's
//     own plumbing (the reward file), a main guard;
//   - has at least AnchorTokens tokens, MinChars characters besides white
//     space, MinWords distinct words, and MinEntropy bits of entropy a
//     character (so no rule of dashes, no run of brackets);
//   - keeps MinOwnChars characters and MinOwnWords distinct words outside
//     every run of CoverTokens tokens it shares with the instruction: a
//     test that quotes the instruction is not an answer;
//   - occurs in none of the texts the agent is given (the instruction, the
//     workspace, the environment's files), anywhere, as a whole.
//
// A place is reported when the fragments found there that come from one
// hidden file add up to MinEvidence characters.
const (
	AnchorTokens = 6
	MinChars     = 24
	MinWords     = 3
	MinEntropy   = 3.0
	MinOwnChars  = 16
	MinOwnWords  = 2
	CoverTokens  = 4
	MinEvidence  = 32
)

// maxFragmentTokens bounds a fragment: a longer line (minified code, a
// data blob) is searched for by its first maxFragmentTokens tokens.
const maxFragmentTokens = 2048

// commentPrefixes start a line that is only a comment (or a shebang, or a
// C preprocessor line).
var commentPrefixes = []string{"#", "//", "/*", "*", "--", ";", "<!--", "%", "rem ", "REM "}

// importPrefixes start an import.
var importPrefixes = []string{
	"import ", "from ", "require ", "require(", "use ", "using ", "package ",
	"extern crate ", "library(", "source ", "export PATH=",
}

// fetchCommands are commands whose lines install or fetch the tools a
// script needs: the environment's business, the same in every task.
var fetchCommands = map[string]bool{
	"apt-get": true, "apt": true, "apk": true, "yum": true, "dnf": true, "pip": true, "pip3": true,
	"pipx": true, "uv": true, "uvx": true, "npm": true, "npx": true, "yarn": true, "pnpm": true,
	"conda": true, "mamba": true, "cargo": true, "gem": true, "curl": true, "wget": true, "brew": true,
	"set": true, // set -euo pipefail
}

// plumbing marks the harness's own paths: a line that writes the reward or
// the logs is the same in every verifier.
var plumbing = []string{"/logs/verifier", "/logs/agent", "reward.txt", "reward.json"}

// commonLines are lines, as tokens joined without space, that stand in too
// many programs to mean anything.
var commonLines = map[string]bool{
	`if__name__=="__main__":`: true, `if__name__=='__main__':`: true,
	`unittest.main()`: true, `sys.exit(main())`: true, `raiseSystemExit(main())`: true,
}

// boilerplate reports whether a line (trimmed) is of a kind no answer is
// made of.
func boilerplate(line []byte) bool {
	s := string(line)
	for _, p := range commentPrefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	for _, p := range importPrefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	for _, p := range plumbing {
		if strings.Contains(s, p) {
			return true
		}
	}
	first, rest, _ := strings.Cut(s, " ")
	if first == "sudo" || first == "RUN" {
		first, rest, _ = strings.Cut(rest, " ")
	}
	if fetchCommands[first] || (strings.HasPrefix(first, "python") && strings.HasPrefix(rest, "-m pip ")) ||
		(first == "go" && (strings.HasPrefix(rest, "get ") || strings.HasPrefix(rest, "install "))) {
		return true
	}
	return commonLines[string(squeeze(line))]
}

// stripComment returns line without a trailing comment: from a '#' or
// "//" that follows white space outside quotes. A fragment is the code,
// when that alone is distinctive: the comment is the easiest part to drop.
func stripComment(line []byte) []byte {
	var quote byte
	for i := 1; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		case (c == '#' || c == '/' && i+1 < len(line) && line[i+1] == '/') && class[line[i-1]] == classSpace:
			return bytes.TrimSpace(line[:i])
		}
	}
	return line
}

// squeeze returns line without its white space.
func squeeze(line []byte) []byte {
	out := make([]byte, 0, len(line))
	for _, c := range line {
		if class[c] != classSpace {
			out = append(out, c)
		}
	}
	return out
}

// entropy is the Shannon entropy, in bits a byte, of line's non-space
// bytes.
func entropy(line []byte) float64 {
	var counts [256]int
	n := 0
	for _, c := range line {
		if class[c] != classSpace {
			counts[c]++
			n++
		}
	}
	e := 0.0
	for _, k := range counts {
		if k > 0 {
			p := float64(k) / float64(n)
			e -= p * math.Log2(p)
		}
	}
	return e
}

// codeFile reports whether a hidden file's lines are code (a script, a
// program, a patch) rather than data (an expected output, a fixture). An
// honest agent's own program may print what a data file holds and show it
// to its model, so in model requests only code fragments count; in the
// agent's files every fragment does.
func codeFile(name string, data []byte) bool {
	if bytes.HasPrefix(data, []byte("#!")) {
		return true
	}
	base := path.Base(name)
	switch base {
	case "Dockerfile", "Makefile", "makefile", "GNUmakefile", "Rakefile", "Justfile":
		return true
	}
	switch strings.ToLower(path.Ext(base)) {
	case ".py", ".sh", ".bash", ".zsh", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".go", ".rs",
		".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".java", ".kt", ".scala", ".rb", ".pl", ".pm",
		".php", ".lua", ".r", ".jl", ".swift", ".cs", ".sql", ".patch", ".diff", ".mk", ".hs", ".ml", ".ex", ".exs":
		return true
	}
	return false
}

// codeShaped reports whether a line reads as code: it calls, assigns,
// opens a block, ends a statement, expands a shell variable, redirects or
// chains commands. A line of bare values (a row of expected output inside
// a string literal) does not.
func codeShaped(line []byte) bool {
	return bytes.ContainsAny(line, "(={;$&>")
}
