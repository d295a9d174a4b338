package trial

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/diskfs"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// A task's storage_mb is disk and its memory_mb memory, two budgets, as
// under Docker: with 512 MB of memory and 4096 MB of storage, the agent
// (and the grader) write 3 GB and go on; 5 GB fills the disk, and the
// verdict says `limit: storage`, not `memory`. Only a tmpfs asked for by
// name holds the layers in memory, and the verdict says so. Every write is
// real data, synced to the image (dd conv=fsync), never a sparse file.
func TestStorageIsDisk(t *testing.T) {
	requireRoot(t)
	if raceEnabled {
		t.Skip("covered by the run without the race detector (it writes gigabytes)")
	}
	// write writes n MiB at path, real data synced to the disk.
	write := func(path string, n int) string {
		return fmt.Sprintf("dd if=/dev/zero of=%s bs=1M count=%d conv=fsync", path, n)
	}
	// write3G writes 3 GiB at path, records its size and removes it (a
	// changeset carries 1 GiB at most).
	write3G := func(path string) string {
		return write(path, 3072) + " && stat -c %s " + path + " > /app/size && rm " + path
	}
	const (
		reward    = `echo 1 > /logs/verifier/reward.txt`
		sizeCheck = `[ "$(cat /app/size)" = 3221225472 ] && ` + reward
	)
	cases := []struct {
		name, agent, test string
		storage           string
		// what each phase's limit must be, its exit code, the status
		agentLimit, graderLimit sandbox.Limit
		agentExit               int
		status                  Status
		passed                  bool
		backend                 string
	}{
		{"the agent writes 3 GB", write3G("/root/big"), sizeCheck,
			"", "", "", 0, StatusClean, true, StorageDisk},
		// Its 4 GB file is more than a changeset may carry: not graded.
		{"the agent writes 5 GB", write("/root/big", 5120), reward,
			"", LimitStorage, "", 1, StatusLimit, false, StorageDisk},
		// /tmp is storage too, and never in the changeset: graded.
		{"the agent writes 5 GB in tmp", write("/tmp/big", 5120), reward,
			"", LimitStorage, "", 1, StatusLimit, true, StorageDisk},
		{"the grader writes 3 GB in tmp", "true", write3G("/tmp/big") + " && " + sizeCheck,
			"", "", "", 0, StatusClean, true, StorageDisk},
		// The reward first: nothing can be written once the disk is full.
		{"the grader writes 5 GB", "true", reward + "; " + write("/root/big", 5120),
			"", "", LimitStorage, 0, StatusLimit, true, StorageDisk},
		{"a tmpfs asked for by name is memory", write("/root/big", 1024), reward,
			StorageMemory, sandbox.LimitMemory, "", 137, StatusLimit, true, StorageMemory},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := writeTask(t, taskSpec{test: c.test, memoryMB: 512, storageMB: 4096})
			scratch := t.TempDir()
			out := filepath.Join(t.TempDir(), "out")
			v, err := Run(context.Background(), Options{Task: tk, Agent: c.agent, Out: out, CacheDir: sharedCache,
				ScratchDir: scratch, Storage: c.storage, Key: testKey})
			if v == nil {
				t.Fatalf("Run: %v", err)
			}
			agent, grader := v.Phases[PhaseAgent], v.Phases[PhaseGrader]
			t.Logf("agent %+v\ngrader %+v\nagent log: %s\ngrader log: %s", agent, grader,
				readFile(t, filepath.Join(out, AgentLog)), readFile(t, filepath.Join(out, GraderLog)))
			if agent.Limit != c.agentLimit || agent.ExitCode != c.agentExit {
				t.Errorf("agent: limit %q, exit %d; want limit %q, exit %d", agent.Limit, agent.ExitCode, c.agentLimit, c.agentExit)
			}
			if grader.Limit != c.graderLimit || (c.graderLimit == LimitStorage) != slices.Contains(grader.LimitsHit, LimitStorage) {
				t.Errorf("grader: limit %q, hit %v; want %q", grader.Limit, grader.LimitsHit, c.graderLimit)
			}
			if v.Status != c.status || v.Passed != c.passed {
				t.Errorf("status %s passed %t (error %q); want %s %t", v.Status, v.Passed, v.Error, c.status, c.passed)
			}
			if v.Storage == nil || v.Storage.Backend != c.backend || v.Storage.SizeMB != 4096 ||
				(c.backend == StorageMemory) != (v.Storage.Reason != "") {
				t.Errorf("verdict storage %+v; want %s, 4096 MB, a reason when not disk", v.Storage, c.backend)
			}
			if c.agentLimit == LimitStorage && !strings.Contains(readFile(t, filepath.Join(out, AgentLog)), "No space left") {
				t.Error("the agent's disk filled without an ENOSPC")
			}
			checkNothingLeft(t, scratch)
		})
	}
}

// checkNothingLeft fails unless scratch holds nothing a trial made: no
// directory, no mount, no loop device attached to an image made there
// (AUTOCLEAR detaches one once its filesystem is let go, from a work
// queue: a moment's wait).
func checkNothingLeft(t *testing.T, scratch string) {
	t.Helper()
	var attached []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if attached, err = diskfs.Attached(scratch); err != nil {
			t.Fatal(err)
		}
		if len(attached) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(attached) > 0 {
		t.Errorf("loop devices left attached: %v", attached)
	}
	if des, _ := os.ReadDir(scratch); len(des) > 0 {
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		t.Errorf("left in the scratch dir: %v", names)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], scratch+"/") {
			t.Errorf("left mounted: %s", f[4])
		}
	}
}

// Where the layers live: disk unless memory is asked for by name, or the
// process can have no loop devices (not root); the verdict says why.
func TestStorageFor(t *testing.T) {
	cases := []struct {
		asked   string
		root    bool
		backend string
		reason  string // a word of it
		err     bool
	}{
		{"", true, StorageDisk, "", false},
		{StorageDisk, true, StorageDisk, "", false},
		{StorageMemory, true, StorageMemory, "asked", false},
		{"", false, StorageMemory, "not root", false},
		{StorageMemory, false, StorageMemory, "asked", false},
		{"ram", true, "", "", true},
	}
	for _, c := range cases {
		st, err := storageFor(c.asked, c.root, 100)
		if c.err {
			if err == nil {
				t.Errorf("storageFor(%q): %+v, want an error", c.asked, st)
			}
			continue
		}
		if err != nil || st.Backend != c.backend || st.SizeMB != 100 || !strings.Contains(st.Reason, c.reason) || (c.reason == "") != (st.Reason == "") {
			t.Errorf("storageFor(%q, root %t) = %+v, %v; want %s with a reason naming %q", c.asked, c.root, st, err, c.backend, c.reason)
		}
	}
}
