package task

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sentinels, matched with errors.Is through the *Error that Load and Digest
// return. Their text has no "task:" prefix because it is printed after the
// file and field, as in "/t/task.toml: [proctor].grading: unknown value "x"".
var (
	// ErrMissing means a required file or a path named by a field does not
	// exist.
	ErrMissing = errors.New("missing")

	// ErrNotDir means a path that must be a directory is something else.
	ErrNotDir = errors.New("not a directory")

	// ErrNotRegular means a path that must be a regular file is something
	// else.
	ErrNotRegular = errors.New("not a regular file")

	// ErrSyntax means task.toml is not valid TOML; the *Error's Err is then a
	// *SyntaxError with the line and column.
	ErrSyntax = errors.New("invalid TOML")

	// ErrType means a known key holds a value of the wrong TOML type.
	ErrType = errors.New("wrong type")

	// ErrValue means a known key holds a value of the right type that is out
	// of range or malformed (a negative limit, a bad environment name, a
	// relative workdir, a bad glob).
	ErrValue = errors.New("invalid value")

	// ErrUnknownValue means a key that takes one of a few words holds
	// another.
	ErrUnknownValue = errors.New("unknown value")

	// ErrUnsupported means the task asks for something Proctor does not do
	// yet, such as network egress. It is never ignored: the task would run
	// under conditions its author did not intend.
	ErrUnsupported = errors.New("not supported yet")

	// ErrEscape means a path leads outside the task directory: it is
	// absolute, climbs out with "..", or passes a symbolic link that points
	// outside.
	ErrEscape = errors.New("leads outside the task directory")

	// ErrOverlap means the workspace or rootfs overlaps tests/ or solution/,
	// which would show the agent the grader or the answer.
	ErrOverlap = errors.New("overlaps tests or solution")

	// ErrNotGitRepo means [proctor].git_base is set but the workspace has no
	// .git directory.
	ErrNotGitRepo = errors.New("not a git repository")

	// ErrSpecialFile means Digest met a fifo, socket or device file; tasks
	// must not contain them.
	ErrSpecialFile = errors.New("special file")

	// ErrChanged means an entry changed identity while Digest was reading the
	// tree (a file replaced by a symlink, say). The digest would describe no
	// state the tree was ever in, so none is returned.
	ErrChanged = errors.New("changed while being read")

	// ErrTooLarge means task.toml is larger than MaxConfigSize.
	ErrTooLarge = errors.New("too large")
)

// Error is the only error type Load and Digest return. Its Error method
// always gives one line, "FILE: FIELD: MESSAGE", leaving out an empty FILE or
// FIELD; control characters from paths or values are escaped so that a
// crafted name cannot break the line.
type Error struct {
	File  string // absolute path of the file concerned
	Field string // "[proctor].grading", "[environment].memory_mb"; "" when the whole file is at fault
	Err   error  // wraps one of the sentinels above
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("unknown error")
	}
	return oneLine(b.String())
}

func (e *Error) Unwrap() error { return e.Err }

// SyntaxError is the Err of an *Error for a task.toml that does not parse.
// Line and Column count from 1; either is 0 when the parser did not say.
type SyntaxError struct {
	Line, Column int
	Msg          string // the parser's message, one line
}

func (e *SyntaxError) Error() string {
	var pos string
	switch {
	case e.Line > 0 && e.Column > 0:
		pos = fmt.Sprintf("line %d, column %d: ", e.Line, e.Column)
	case e.Line > 0:
		pos = fmt.Sprintf("line %d: ", e.Line)
	}
	return ErrSyntax.Error() + ": " + pos + e.Msg
}

func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// detail is an error whose text is written in full by the caller but which
// still matches its sentinel with errors.Is.
type detail struct {
	msg      string
	sentinel error
}

func (d *detail) Error() string { return d.msg }
func (d *detail) Unwrap() error { return d.sentinel }

// errorf returns an error reading format that matches sentinel.
func errorf(sentinel error, format string, args ...any) error {
	return &detail{msg: fmt.Sprintf(format, args...), sentinel: sentinel}
}

// oneLine escapes control characters and invalid UTF-8 so that s prints on
// one line.
func oneLine(s string) string {
	clean := true
	for i, r := range s {
		if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' || (r == utf8.RuneError && isBadRune(s, i)) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && isBadRune(s, i):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isBadRune reports whether the RuneError at s[i] stands for an invalid byte
// rather than an encoded U+FFFD.
func isBadRune(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 1
}
