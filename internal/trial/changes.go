package trial

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/workspace"
)

// archiveFile reads the content of the changeset's file at p (at most max
// bytes; more is an error), checked against the changeset as it is read.
func archiveFile(archive string, cs *workspace.Changeset, p string, max int64) ([]byte, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, fmt.Errorf("reading the changeset: %w", err)
	}
	defer f.Close()
	rd := workspace.NewReader(f, workspace.DefaultLimits())
	for {
		e, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%s: not in the changeset", p)
			}
			return nil, fmt.Errorf("reading the changeset: %w", err)
		}
		if e.Path != p {
			continue
		}
		if e.Kind != workspace.KindFile {
			return nil, fmt.Errorf("%s: not a file", p)
		}
		if e.Size > max {
			return nil, fmt.Errorf("%s: %d bytes, more than %d", p, e.Size, max)
		}
		b := make([]byte, e.Size)
		if _, err := io.ReadFull(rd, b); err != nil {
			return nil, fmt.Errorf("reading %s from the changeset: %w", p, err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != e.SHA256 {
			return nil, fmt.Errorf("%s: content does not match the changeset", p)
		}
		return b, nil
	}
}

func applyArchive(path string, cs *workspace.Changeset, l *layout, keep map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading the changeset: %w", err)
	}
	defer f.Close()
	err = workspace.Apply(f, cs, l.workspaceLayers(), func(e workspace.Entry) bool { return keep[e.Path] }, sandbox.RootID(), sandbox.RootID())
	if err != nil {
		return fmt.Errorf("applying the changeset: %w", err)
	}
	return nil
}
