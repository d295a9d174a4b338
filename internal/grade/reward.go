package grade

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The files a verifier may write its reward to, in the order they are tried
// (Harbor's: reward.json with a "reward" key, else reward.txt).
const (
	RewardJSON = "reward.json"
	RewardText = "reward.txt"
)

// maxRewardFile caps what is read of a reward file.
const maxRewardFile = 64 << 10

// ErrNoReward means the verifier wrote neither reward file.
var ErrNoReward = errors.New("the verifier wrote no reward (neither " + RewardJSON + " nor " + RewardText + ")")

// Reward is what the verifier reported.
type Reward struct {
	Value float64 // the reward, a finite number
	File  string  // the file it came from
}

// ReadReward reads the reward from the verifier's results directory dir (a
// host path the harness created). A file that exists but does not parse is an
// error naming it; a reward that is not a finite number is too.
func ReadReward(dir string) (Reward, error) {
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Reward{}, fmt.Errorf("opening the verifier's results: %w", err)
	}
	defer unix.Close(dfd)
	var found []Reward
	for _, name := range []string{RewardJSON, RewardText} {
		data, err := readBeneath(dfd, name)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return Reward{}, fmt.Errorf("%s: %w", name, err)
		}
		v, err := parseReward(name, data)
		if err != nil {
			return Reward{}, fmt.Errorf("%s: %w", name, err)
		}
		found = append(found, Reward{Value: v, File: name})
	}
	switch {
	case len(found) == 0:
		return Reward{}, ErrNoReward
	case len(found) == 2 && found[0].Value != found[1].Value:
		// The code under test runs inside the grader and can write the
		// file the verifier does not: two rewards that disagree are no
		// reward at all.
		return Reward{}, fmt.Errorf("%w: %s says %g, %s says %g", ErrConflict, RewardJSON, found[0].Value, RewardText, found[1].Value)
	}
	return found[0], nil
}

// ErrConflict means the two reward files disagree.
var ErrConflict = errors.New("the reward files disagree")

func parseReward(name string, data []byte) (float64, error) {
	var v float64
	if name == RewardJSON {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(data, &doc); err != nil {
			return 0, fmt.Errorf("not a JSON object: %w", err)
		}
		raw, ok := doc["reward"]
		if !ok {
			return 0, fmt.Errorf(`no "reward" key`)
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return 0, fmt.Errorf(`"reward" is not a number: %s`, strings.TrimSpace(string(raw)))
		}
	} else {
		s := strings.TrimSpace(string(data))
		var err error
		if v, err = strconv.ParseFloat(s, 64); err != nil {
			return 0, fmt.Errorf("not a number: %q", truncate(s, 40))
		}
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("reward %v is not a finite number", v)
	}
	return v, nil
}

// readBeneath reads the regular file name in dfd, refusing symlinks, special
// files and anything larger than maxRewardFile.
func readBeneath(dfd int, name string) ([]byte, error) {
	fd, err := unix.Openat2(dfd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("is a symlink: refused")
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRewardFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRewardFile {
		return nil, fmt.Errorf("larger than %d bytes", maxRewardFile)
	}
	return data, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
