package imagebuild

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
)

// Every instruction, flag or form the builder does not build is refused
// when the Dockerfile is parsed, naming its line: never silently ignored.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, df string
		line     int
		want     string
		is       error
	}{
		{"RUN --mount", "FROM scratch\nRUN --mount=type=cache,target=/root/.cache true\n", 2, "RUN --mount", ErrUnsupported},
		{"RUN --network", "FROM scratch\n\nRUN --network=host true\n", 3, "RUN --network", ErrUnsupported},
		{"RUN --security", "FROM scratch\nRUN --security=insecure true\n", 2, "RUN --security", ErrUnsupported},
		{"COPY --parents", "FROM scratch\nCOPY --parents a/b /x/\n", 2, "COPY --parents", ErrUnsupported},
		{"ADD --keep-git-dir", "FROM scratch\nADD --keep-git-dir=true https://example.com/r.git /x\n", 2, "keep-git-dir", ErrUnsupported},
		{"ADD --unpack", "FROM scratch\nADD --unpack=true a.tar /x\n", 2, "--unpack", ErrUnsupported},
		{"symbolic chmod", "FROM scratch\nCOPY --chmod=u+x a /a\n", 2, "--chmod=u+x", ErrUnsupported},
		{"chmod too large", "FROM scratch\nCOPY --chmod=17777 a /a\n", 2, "--chmod=17777", ErrUnsupported},
		{"shebang heredoc", "FROM scratch\nRUN <<EOF\n#!/usr/bin/env python3\nprint(1)\nEOF\n", 2, "#!", ErrUnsupported},
		{"unknown instruction", "FROM scratch\nFOO bar\n", 2, "unknown instruction", nil},
		{"no FROM", "# nothing\n", 1, "no instructions", nil},
		{"instruction before FROM", "RUN true\nFROM scratch\n", 1, "", nil},
		{"bad stage name", "FROM scratch AS 1bad\n", 1, "stage", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("environment/Dockerfile", strings.NewReader(tc.df))
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("Parse = %v, want a *LineError", err)
			}
			if le.File != "environment/Dockerfile" || le.Line != tc.line {
				t.Errorf("error at %s:%d, want line %d: %v", le.File, le.Line, tc.line, err)
			}
			if tc.line > 0 && !strings.HasPrefix(err.Error(), "environment/Dockerfile:"+itoa(tc.line)+": ") {
				t.Errorf("message %q does not start with the file and line", err)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("message %q: want %q on one line", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

// What the builder does build parses, with BuildKit's types.
func TestParseAccepts(t *testing.T) {
	df := `# syntax=docker/dockerfile:1
ARG BASE=debian:trixie
FROM $BASE AS build
ARG N=1
ENV A=1 B="two words"
WORKDIR /src
COPY --chown=app:app --chmod=0644 --exclude=*.log . .
COPY --link a /a
COPY <<EOF /etc/motd
hello
EOF
ADD --checksum=sha256:0000000000000000000000000000000000000000000000000000000000000000 https://example.com/f /f
RUN make && \
    make install
RUN <<EOF
set -e
echo heredoc
EOF
RUN cat <<A > /a <<B > /b
a
A
b
B
SHELL ["/bin/bash", "-c"]
USER 1000:1000
LABEL k=v
EXPOSE 80 443/udp
VOLUME /data
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=5s CMD true
ONBUILD RUN echo child
MAINTAINER someone
ENTRYPOINT ["/bin/sh"]
CMD ["-c", "true"]
FROM scratch
COPY --from=build /src/out /out
COPY --from=0 /etc/motd /motd
`
	d, err := Parse("Dockerfile", strings.NewReader(df))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Stages) != 2 || len(d.MetaArgs) != 1 || d.Stages[0].Name != "build" {
		t.Errorf("stages %d, meta args %d, first stage %q", len(d.Stages), len(d.MetaArgs), d.Stages[0].Name)
	}
}

// A step key is a hash of its parts: a part boundary moved, a part
// changed, or the version changed gives another key.
func TestKeyOf(t *testing.T) {
	base := keyOf("parent", "RUN", "make")
	for name, k := range map[string]string{
		"boundary":   keyOf("parent", "RU", "Nmake"),
		"joined":     keyOf("parent", "RUNmake"),
		"instr":      keyOf("parent", "RUN", "make install"),
		"parent":     keyOf("parent2", "RUN", "make"),
		"extra part": keyOf("parent", "RUN", "make", ""),
	} {
		if k == base {
			t.Errorf("%s: same key", name)
		}
	}
	if keyOf("parent", "RUN", "make") != base || len(base) != 64 {
		t.Errorf("keys are not stable hex sha256: %q", base)
	}
}

func TestHeredocScript(t *testing.T) {
	for _, tc := range []struct{ df, want string }{
		{"FROM scratch\nRUN <<EOF\necho a\necho b\nEOF\n", "echo a\necho b\n"},
		{"FROM scratch\nRUN cat <<EOF > /x\nhi\nEOF\n", "cat <<EOF > /x\nhi\nEOF"},
	} {
		d, err := Parse("Dockerfile", strings.NewReader(tc.df))
		if err != nil {
			t.Fatal(err)
		}
		got, err := heredocScript(runCmd(t, d))
		if err != nil || got != tc.want {
			t.Errorf("heredocScript = %q, %v; want %q", got, err, tc.want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func runCmd(t *testing.T, d *Dockerfile) *instructions.RunCommand {
	t.Helper()
	for _, c := range d.Stages[0].Commands {
		if r, ok := c.(*instructions.RunCommand); ok {
			return r
		}
	}
	t.Fatal("no RUN")
	return nil
}
