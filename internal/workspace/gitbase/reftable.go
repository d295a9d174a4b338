package gitbase

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// Reading refs from a reftable stack (extensions.refStorage = reftable,
// git 2.45 and later), as data, so that no git runs in src and a git too
// old to know the format can still build the copy (it only reads objects).
// Only what resolving one name needs is read: the ref blocks of each table,
// newest table first; the first table holding a record for the name
// decides, a deletion record meaning "no such ref". Layout (git's
// Documentation/technical/reftable.txt):
//
//	table:   header ref_block* (index, obj, log blocks…) footer
//	header:  "REFT" version(1) block_size(3) min_update_index(8) max_update_index(8) [hash_id(4), version 2]
//	block:   type(1) block_len(3) record* restart_offset(3)* restart_count(2) [padding]
//	         the first block includes the header; block_len counts from the block's start
//	record:  varint(prefix_len) varint(suffix_len<<3 | value_type) suffix varint(update_index_delta) value
//	value:   0 deletion; 1 id; 2 id, peeled id; 3 varint(len) symref target
//
// Varints are git's offset encoding (each continuation adds one).

// maxReftable bounds the size of one table read into memory.
const maxReftable = 256 << 20

// reftableGet looks name up in the reftable stack under dir (a git dir's
// reftable/). found is false when no table has a live record of it.
// symref is the target of a symbolic ref, else oid is its id.
func reftableGet(dir, name string, hashLen int) (oid, symref string, found bool, err error) {
	list, err := readSmall(filepath.Join(dir, "tables.list"))
	if err != nil {
		return "", "", false, fmt.Errorf("reftable: %w", err)
	}
	tables := strings.Fields(string(list))
	for i := len(tables) - 1; i >= 0; i-- {
		t := tables[i]
		if strings.ContainsAny(t, "/\\") || strings.HasPrefix(t, ".") {
			return "", "", false, fmt.Errorf("reftable: tables.list names %q", t)
		}
		data, err := readSmallLimit(filepath.Join(dir, t), maxReftable)
		if err != nil {
			return "", "", false, fmt.Errorf("reftable: %w", err)
		}
		rec, ok, err := reftableFind(data, name, hashLen)
		if err != nil {
			return "", "", false, fmt.Errorf("reftable %s: %w", t, err)
		}
		if !ok {
			continue
		}
		switch rec.kind {
		case 0:
			return "", "", false, nil // deleted here: older tables do not count
		case 3:
			return "", string(rec.value), true, nil
		default:
			return hex.EncodeToString(rec.value[:hashLen/2]), "", true, nil
		}
	}
	return "", "", false, nil
}

// reftableRecord is one ref record of a table.
type reftableRecord struct {
	kind  byte   // value_type
	value []byte // the id (and peeled id), or the symref target
}

var errReftable = errors.New("malformed table")

// reftableFind returns the record of name in the ref blocks of one table.
func reftableFind(data []byte, name string, hashLen int) (reftableRecord, bool, error) {
	hashSize := hashLen / 2
	if len(data) < 24 || string(data[:4]) != "REFT" {
		return reftableRecord{}, false, fmt.Errorf("%w: no header", errReftable)
	}
	headerLen, footerLen := 24, 68
	switch data[4] {
	case 1:
	case 2:
		headerLen, footerLen = 28, 72
	default:
		return reftableRecord{}, false, fmt.Errorf("%w: version %d", errReftable, data[4])
	}
	if len(data) < headerLen+footerLen {
		return reftableRecord{}, false, fmt.Errorf("%w: too short", errReftable)
	}
	end := len(data) - footerLen
	for pos := 0; pos < end; {
		start, recs := pos, pos
		if pos == 0 {
			recs = headerLen
		}
		if recs+4 > end {
			break
		}
		if data[recs] != 'r' {
			break // past the ref blocks
		}
		blockLen := int(uint24(data[recs+1:]))
		if blockLen < recs-start+4+2 || start+blockLen > end {
			return reftableRecord{}, false, fmt.Errorf("%w: block length %d at %d", errReftable, blockLen, start)
		}
		block := data[start : start+blockLen]
		rec, found, past, err := reftableBlock(block, recs-start+4, name, hashSize)
		if err != nil || found || past {
			return rec, found, err
		}
		pos = start + blockLen
		for pos < end && data[pos] == 0 { // padding to the block size
			pos++
		}
	}
	return reftableRecord{}, false, nil
}

// reftableBlock scans the records of one ref block from off. past reports
// that a name sorting after name was met: no later block can hold it.
func reftableBlock(block []byte, off int, name string, hashSize int) (rec reftableRecord, found, past bool, err error) {
	restarts := int(binary.BigEndian.Uint16(block[len(block)-2:]))
	recEnd := len(block) - 2 - 3*restarts
	if restarts == 0 || recEnd < off {
		return rec, false, false, fmt.Errorf("%w: restart table", errReftable)
	}
	bad := func(what string) error { return fmt.Errorf("%w: %s at %d", errReftable, what, off) }
	var key []byte
	for off < recEnd {
		prefix, n := reftableVarint(block[off:recEnd])
		if n == 0 {
			return rec, false, false, bad("prefix length")
		}
		off += n
		sv, n := reftableVarint(block[off:recEnd])
		if n == 0 {
			return rec, false, false, bad("suffix length")
		}
		off += n
		suffix, kind := int(sv>>3), byte(sv&7)
		if prefix > uint64(len(key)) || suffix > recEnd-off {
			return rec, false, false, bad("key")
		}
		key = append(key[:prefix], block[off:off+suffix]...)
		off += suffix
		if _, n = reftableVarint(block[off:recEnd]); n == 0 {
			return rec, false, false, bad("update index")
		}
		off += n
		var value []byte
		switch kind {
		case 0:
		case 1, 2:
			size := hashSize * int(kind)
			if size > recEnd-off {
				return rec, false, false, bad("id")
			}
			value = block[off : off+size]
			off += size
		case 3:
			tl, n := reftableVarint(block[off:recEnd])
			if n == 0 || tl > uint64(recEnd-off-n) {
				return rec, false, false, bad("symref")
			}
			off += n
			value = block[off : off+int(tl)]
			off += int(tl)
		default:
			return rec, false, false, bad(fmt.Sprintf("value type %d", kind))
		}
		switch c := bytes.Compare(key, []byte(name)); {
		case c == 0:
			return reftableRecord{kind: kind, value: bytes.Clone(value)}, true, false, nil
		case c > 0:
			return rec, false, true, nil
		}
	}
	return rec, false, false, nil
}

// reftableVarint decodes one varint; n is 0 when b ends first.
func reftableVarint(b []byte) (v uint64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	v = uint64(b[0] & 0x7f)
	n = 1
	for b[n-1]&0x80 != 0 {
		if n >= len(b) || n > 9 {
			return 0, 0
		}
		v = ((v + 1) << 7) | uint64(b[n]&0x7f)
		n++
	}
	return v, n
}

func uint24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

// reftableDir returns where the reftable stack holding name lives: the
// worktree's own for HEAD and per-worktree refs, else the common one.
func (r *srcRepo) reftableDir(name string) string {
	dir := r.refPath(name)
	base := r.commonDir
	if dir == filepath.Join(r.gitDir, filepath.FromSlash(name)) && r.gitDir != r.commonDir {
		base = r.gitDir
	}
	return filepath.Join(base, "reftable")
}

// readReftableRef is readRef for a reftable repository.
func (r *srcRepo) readReftableRef(name string) (oid string, found bool, err error) {
	for range 5 { // git's SYMREF_MAXDEPTH
		id, target, ok, err := reftableGet(r.reftableDir(name), name, r.hexLen)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", false, nil
			}
			return "", false, err
		}
		if !ok {
			return "", false, nil
		}
		if target == "" {
			return id, true, nil
		}
		if !validRefName(target) || (!strings.HasPrefix(target, "refs/") && !isRootRefSyntax(target)) {
			return "", false, fmt.Errorf("ref %s: bad symbolic ref target %q", name, target)
		}
		name = target
	}
	return "", false, fmt.Errorf("ref %s: symbolic refs nested too deep", name)
}
