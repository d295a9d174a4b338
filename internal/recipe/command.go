package recipe

import (
	"maps"
	"slices"
	"strings"
)

// Command is the shell command (for /bin/sh -c) that runs the agent with
// the model of provider p: the recipe's environment exported, its log
// directories made, then its executable in the layer with its arguments,
// each word quoted. The instruction is read from instructionFile when the
// agent starts.
func (r *Recipe) Command(p Provider, model, instructionFile string) string {
	var b strings.Builder
	if r.Package.Node != nil {
		b.WriteString(`export PATH=` + quote(layerPath(LayerPath, dirOf(NodeBin))) + `":$PATH"; `)
	}
	for _, k := range sortedKeys(r.Env) {
		b.WriteString("export " + k + "=" + r.word(r.Env[k], p, model, instructionFile) + "; ")
	}
	if len(r.Logs) > 0 {
		b.WriteString("mkdir -p")
		for _, l := range r.Logs {
			b.WriteString(" " + quote(l))
		}
		b.WriteString(" && ")
	}
	b.WriteString("exec " + quote(layerPath(LayerPath, r.Package.Bin)))
	for _, a := range r.Args {
		b.WriteString(" " + r.word(a, p, model, instructionFile))
	}
	return b.String()
}

// word quotes one argument for the shell, with its placeholders filled:
// literal text single-quoted, ${NAME} and {instruction} expanded by the
// shell inside double quotes, and nothing else read as syntax.
func (r *Recipe) word(s string, p Provider, model, instructionFile string) string {
	var b strings.Builder
	lit := func(t string) {
		if t != "" {
			b.WriteString(quote(t))
		}
	}
	for s != "" {
		i := strings.IndexAny(s, "{$")
		if i < 0 {
			lit(s)
			break
		}
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, "{instruction}"):
			lit(s[:i])
			b.WriteString(`"$(cat ` + quote(instructionFile) + `)"`)
			s = rest[len("{instruction}"):]
		case strings.HasPrefix(rest, "{model}"):
			lit(s[:i] + model)
			s = rest[len("{model}"):]
		case strings.HasPrefix(rest, "{provider}"):
			lit(s[:i] + p.Name)
			s = rest[len("{provider}"):]
		case strings.HasPrefix(rest, "{layer}"):
			lit(s[:i] + LayerPath)
			s = rest[len("{layer}"):]
		case strings.HasPrefix(rest, "${"):
			end := strings.IndexByte(rest, '}') // Validate saw it closed
			lit(s[:i])
			b.WriteString(`"` + rest[:end+1] + `"`)
			s = rest[end+1:]
		default:
			lit(s[:i+1])
			s = rest[1:]
		}
	}
	if b.Len() == 0 {
		return "''"
	}
	return b.String()
}

// quote single-quotes s for the shell.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func layerPath(dir, rel string) string { return dir + "/" + rel }

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return "."
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
