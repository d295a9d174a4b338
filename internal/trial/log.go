package trial

import (
	"fmt"
	"os"
	"sync"
)

// cappedFile is a phase's log: it keeps the first cap bytes of the output
// and counts the rest, so a chatty or hostile command cannot fill the disk.
// Safe for concurrent writes (stdout and stderr share it).
type cappedFile struct {
	f   *os.File
	cap int64

	mu      sync.Mutex
	written int64
	capped  bool
}

func newCappedFile(path string, cap int64) (*cappedFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating the log: %w", err)
	}
	return &cappedFile{f: f, cap: cap}, nil
}

// Write keeps what fits under the cap and reports every byte as written, so
// the sandbox's output never blocks on a full log.
func (c *cappedFile) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.cap - c.written
	if room <= 0 {
		c.capped = c.capped || len(p) > 0
		return len(p), nil
	}
	q := p
	if int64(len(q)) > room {
		q, c.capped = q[:room], true
	}
	n, err := c.f.Write(q)
	c.written += int64(n)
	if err != nil {
		return n, err
	}
	return len(p), nil
}

func (c *cappedFile) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.capped {
		fmt.Fprintf(c.f, "\n[proctor: log capped at %d bytes]\n", c.cap)
	}
	return c.f.Close()
}
