package task

import (
	"github.com/proctor-sandbox/proctor/internal/netpolicy"

	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// ---- typed access to decoded TOML ----

// table is one decoded TOML table and its name for error messages.
type table struct {
	file string
	name string         // "environment"; "" for the document itself
	m    map[string]any // nil when the table is absent
	elem bool           // an element of an array ("artifacts[0]"): fields are name.key
}

// field names key in this table, as in "[environment].memory_mb". key is
// one of our known, bare keys, or a path built with quoteKey such as
// `env."A B"` or "protected[2]".
func (t table) field(key string) string {
	switch {
	case t.name == "":
		return key
	case t.elem:
		return t.name + "." + key
	}
	return "[" + t.name + "]." + key
}

func (t table) errorf(key string, sentinel error, format string, args ...any) error {
	return &Error{File: t.file, Field: t.field(key), Err: errorf(sentinel, format, args...)}
}

func (t table) wrap(key string, err error) error {
	return &Error{File: t.file, Field: t.field(key), Err: err}
}

func (t table) typeError(key, want string, v any) error {
	return t.errorf(key, ErrType, "want %s, got %s", want, describe(v))
}

// table returns the sub-table key; absent gives an empty table.
func (t table) table(key string) (table, error) {
	sub := table{file: t.file, name: key}
	if t.name != "" {
		sub.name = t.name + "." + quoteKey(key)
	}
	v, ok := t.m[key]
	if !ok {
		return sub, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		name := "[" + sub.name + "]"
		return sub, &Error{File: t.file, Field: name, Err: errorf(ErrType, "want a table, got %s", describe(v))}
	}
	sub.m = m
	return sub, nil
}

func (t table) str(key string) (string, bool, error) {
	v, ok := t.m[key]
	if !ok {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, t.typeError(key, "a string", v)
	}
	return s, true, nil
}

func (t table) boolean(key string) (bool, bool, error) {
	v, ok := t.m[key]
	if !ok {
		return false, false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, false, t.typeError(key, "a boolean", v)
	}
	return b, true, nil
}

// number accepts a TOML integer or float.
func (t table) number(key string) (float64, bool, error) {
	v, ok := t.m[key]
	if !ok {
		return 0, false, nil
	}
	switch n := v.(type) {
	case int64:
		return float64(n), true, nil
	case float64:
		return n, true, nil
	}
	return 0, false, t.typeError(key, "a number", v)
}

// integer accepts a TOML integer, or a float with no fractional part as
// Harbor's pydantic models do.
func (t table) integer(key string) (int64, bool, error) {
	v, ok := t.m[key]
	if !ok {
		return 0, false, nil
	}
	switch n := v.(type) {
	case int64:
		return n, true, nil
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<62 {
			return int64(n), true, nil
		}
	}
	return 0, false, t.typeError(key, "an integer", v)
}

func (t table) strings(key string) ([]string, bool, error) {
	v, ok := t.m[key]
	if !ok {
		return nil, false, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, false, t.typeError(key, "an array of strings", v)
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, false, t.typeError(fmt.Sprintf("%s[%d]", key, i), "a string", e)
		}
		out = append(out, s)
	}
	return out, true, nil
}

// timeout reads a positive number of seconds.
func (t table) timeout(key string, def time.Duration) (time.Duration, error) {
	v, ok, err := t.number(key)
	if err != nil || !ok {
		return def, err
	}
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, t.errorf(key, ErrValue, "want a finite number of seconds, got %s", fmtFloat(v))
	case v <= 0:
		return 0, t.errorf(key, ErrValue, "must be positive, got %s", fmtFloat(v))
	case v*float64(time.Second) >= math.MaxInt64:
		return 0, t.errorf(key, ErrValue, "%s seconds is too long", fmtFloat(v))
	}
	d := time.Duration(math.Round(v * float64(time.Second)))
	if d <= 0 {
		return 0, t.errorf(key, ErrValue, "%s seconds is shorter than a nanosecond", fmtFloat(v))
	}
	return d, nil
}

// megabytes reads key as a positive integer of megabytes, or else the legacy
// string form legacy ("2G", "512M", "1048576K"), which Harbor still accepts
// and converts as here: G × 1024, M as is, K ÷ 1024, truncated. Both given
// and different is an error, as in Harbor.
func (t table) megabytes(key, legacy string, def int64) (int64, error) {
	const maxMB = math.MaxInt64 >> 20 // so that MB << 20 fits an int64
	n, ok, err := t.integer(key)
	if err != nil {
		return 0, err
	}
	if ok && (n <= 0 || n > maxMB) {
		return 0, t.errorf(key, ErrValue, "must be positive and at most %d, got %d", int64(maxMB), n)
	}
	s, lok, err := t.str(legacy)
	if err != nil {
		return 0, err
	}
	if !lok {
		if ok {
			return n, nil
		}
		return def, nil
	}
	m, err := parseSize(s)
	if err != nil {
		return 0, t.wrap(legacy, err)
	}
	if m <= 0 || m > maxMB {
		return 0, t.errorf(legacy, ErrValue, "%q is %d MB (want at least 1 MB)", s, m)
	}
	if ok && n != m {
		return 0, t.errorf(legacy, ErrValue, "%q is %d MB, but %s is %d", s, m, key, n)
	}
	return m, nil
}

// parseSize converts a size like "2G" to megabytes as Harbor's
// EnvironmentConfig._parse_size_to_mb does.
func parseSize(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	var mul float64
	switch {
	case strings.HasSuffix(u, "G"):
		mul = 1024
	case strings.HasSuffix(u, "M"):
		mul = 1
	case strings.HasSuffix(u, "K"):
		mul = 1.0 / 1024
	default:
		return 0, errorf(ErrValue, "invalid size %q (want a number and G, M or K, as in \"2G\")", s)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(u[:len(u)-1]), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f*mul >= 1<<62 {
		return 0, errorf(ErrValue, "invalid size %q (want a number and G, M or K, as in \"2G\")", s)
	}
	return int64(f * mul), nil
}

// env reads a table of environment variables.
func (t table) env(key string) (map[string]string, error) {
	out := map[string]string{}
	v, ok := t.m[key]
	if !ok {
		return out, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, t.typeError(key, "a table of strings", v)
	}
	for k, e := range m {
		f := key + "." + quoteKey(k)
		switch {
		case k == "":
			return nil, t.errorf(key, ErrValue, "empty variable name")
		case strings.ContainsAny(k, "=\x00"):
			return nil, t.errorf(f, ErrValue, "variable name %q contains '=' or NUL", k)
		}
		s, ok := e.(string)
		if !ok {
			return nil, t.typeError(f, "a string", e)
		}
		if strings.IndexByte(s, 0) >= 0 {
			return nil, t.errorf(f, ErrValue, "value contains a NUL byte")
		}
		out[k] = s
	}
	return out, nil
}

// network checks network_mode, allowed_hosts and, in [environment]
// (baseline), allow_internet. No network, or an allow-list when allowlist
// is set (the agent's tables), is offered; public network is ErrUnsupported
// rather than quietly denied. Each allowed host must parse as a
// netpolicy.Rule. ok reports whether the table set network_mode at all.
// network reads a table's network settings. A request for open network
// access (allow_internet = true, as every published Terminal-Bench 2 task
// says, or network_mode = "public") is not granted here: it is recorded
// (internet) and the mode stays NetworkNone; what the agent gets is the
// operator's policy, decided by the run. baseline is set for the table
// that may say allow_internet ([environment]); allowlist for the tables
// whose phase may have an allow-list (not [verifier]).
func (t table) network(baseline, allowlist bool) (mode string, hosts []string, internet, ok bool, err error) {
	asked := ""
	if baseline {
		if b, set, err := t.boolean("allow_internet"); err != nil {
			return "", nil, false, false, err
		} else if set && b {
			asked = "allow_internet"
		}
	}
	mode, ok, err = t.str("network_mode")
	if err != nil {
		return "", nil, false, false, err
	}
	switch {
	case !ok || mode == NetworkNone:
		if ok && asked != "" {
			return "", nil, false, false, t.errorf("network_mode", ErrValue, "%q, but allow_internet = true asks for the internet", mode)
		}
		mode = NetworkNone
	case mode == NetworkAllowlist && allowlist:
	case mode == NetworkAllowlist:
		return "", nil, false, false, t.errorf("network_mode", ErrUnsupported, "the grader never has network (want %q)", NetworkNone)
	case mode == NetworkPublic && allowlist:
		mode, asked = NetworkNone, "network_mode"
	case mode == NetworkPublic:
		return "", nil, false, false, t.errorf("network_mode", ErrUnsupported, "the grader never has network (want %q)", NetworkNone)
	default:
		return "", nil, false, false, t.errorf("network_mode", ErrUnknownValue, "unknown value %q (want %q, %q or %q)", mode, NetworkNone, NetworkAllowlist, NetworkPublic)
	}
	hosts, _, err = t.strings("allowed_hosts")
	if err != nil {
		return "", nil, false, false, err
	}
	if len(hosts) > 0 && mode != NetworkAllowlist {
		return "", nil, false, false, t.errorf("allowed_hosts", ErrValue, "given, but network_mode is not %q", NetworkAllowlist)
	}
	for i, h := range hosts {
		if _, err := netpolicy.ParseRule(h); err != nil {
			return "", nil, false, false, t.errorf(fmt.Sprintf("allowed_hosts[%d]", i), ErrValue, "%v", err)
		}
	}
	if len(hosts) == 0 {
		hosts = nil
	}
	return mode, hosts, asked != "", ok || asked != "", nil
}

// quoteKey writes a TOML key as TOML would: bare when it can be.
func quoteKey(k string) string {
	if k == "" {
		return `""`
	}
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return strconv.Quote(k)
		}
	}
	return k
}

// describe names a decoded TOML value's type, with the value when short.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			return "a string"
		}
		return fmt.Sprintf("string %q", x)
	case int64:
		return fmt.Sprintf("integer %d", x)
	case float64:
		return "float " + fmtFloat(x)
	case bool:
		return fmt.Sprintf("boolean %t", x)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time:
		return "an offset date-time"
	case toml.LocalDateTime:
		return "a local date-time"
	case toml.LocalDate:
		return "a local date"
	case toml.LocalTime:
		return "a local time"
	}
	return fmt.Sprintf("a %T", v)
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
