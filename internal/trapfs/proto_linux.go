package trapfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"syscall"
)

// The wire protocol between the kernel and a FUSE server, written from
// include/uapi/linux/fuse.h. Every message is native-endian; a request is a
// fuse_in_header followed by the opcode's arguments (and, from 7.38, by
// extensions, which are only sent when negotiated and are skipped here); a
// reply is a fuse_out_header followed by the result, or by nothing when the
// header carries an error.

// Opcodes (enum fuse_opcode).
const (
	opLookup        = 1
	opForget        = 2 // no reply
	opGetattr       = 3
	opSetattr       = 4
	opReadlink      = 5
	opSymlink       = 6
	opMknod         = 8
	opMkdir         = 9
	opUnlink        = 10
	opRmdir         = 11
	opRename        = 12
	opLink          = 13
	opOpen          = 14
	opRead          = 15
	opWrite         = 16
	opStatfs        = 17
	opRelease       = 18
	opFsync         = 20
	opSetxattr      = 21
	opGetxattr      = 22
	opListxattr     = 23
	opRemovexattr   = 24
	opFlush         = 25
	opInit          = 26
	opOpendir       = 27
	opReaddir       = 28
	opReleasedir    = 29
	opFsyncdir      = 30
	opGetlk         = 31
	opSetlk         = 32
	opSetlkw        = 33
	opAccess        = 34
	opCreate        = 35
	opInterrupt     = 36 // no reply
	opBmap          = 37
	opDestroy       = 38
	opIoctl         = 39
	opPoll          = 40
	opNotifyReply   = 41 // no reply
	opBatchForget   = 42 // no reply
	opFallocate     = 43
	opReaddirplus   = 44
	opRename2       = 45
	opLseek         = 46
	opCopyFileRange = 47
	opTmpfile       = 51
)

// Protocol version: the major must match the kernel's; the minor is the
// smaller of the kernel's and ours. Every structure decoded here has its
// full 7.12+ size; 7.23 is the first minor whose fuse_init_out is the
// 64-byte one we send, and every kernel with fsopen(2) (5.2+) is newer.
const (
	protoMajor    = 7
	protoMinor    = 38
	minKernelMin  = 23
	maxWrite      = 4096
	readBufferLen = 1 << 17 // ≥ the kernel's minimum (8 KiB, and header + fuse_write_in + maxWrite), and fits a 64 KiB setxattr
)

// Structure sizes.
const (
	inHeaderLen    = 40 // fuse_in_header
	outHeaderLen   = 16 // fuse_out_header
	attrLen        = 88 // fuse_attr
	entryOutLen    = 40 + attrLen
	attrOutLen     = 16 + attrLen
	openOutLen     = 16
	statfsOutLen   = 80
	initOutLen     = 64
	direntHeadLen  = 24 // fuse_dirent without its name
	getxattrOutLen = 8
)

// Bits of fuse_setattr_in.valid.
const (
	fattrMode     = 1 << 0
	fattrUID      = 1 << 1
	fattrGID      = 1 << 2
	fattrSize     = 1 << 3
	fattrAtime    = 1 << 4
	fattrMtime    = 1 << 5
	fattrAtimeNow = 1 << 7
	fattrMtimeNow = 1 << 8
	fattrCtime    = 1 << 10
)

var ne = binary.NativeEndian

// errMalformed means a request does not decode; it is answered EIO.
var errMalformed = errors.New("malformed FUSE request")

// inHeader is struct fuse_in_header.
type inHeader struct {
	Len         uint32
	Opcode      uint32
	Unique      uint64
	NodeID      uint64
	UID         uint32
	GID         uint32
	PID         uint32
	TotalExtlen uint16 // length of the extensions, in 8-byte units
	Padding     uint16
}

// request is one message read from /dev/fuse, split into its parts. Body and
// Ext alias the buffer the message was read into.
type request struct {
	Hdr  inHeader
	Body []byte // the opcode's arguments
	Ext  []byte // extensions, ignored
}

// parseRequest splits a message into header, arguments and extensions. It
// fails unless the header's length is exactly the message's and the
// extensions fit.
func parseRequest(msg []byte) (request, error) {
	var r request
	if len(msg) < inHeaderLen {
		return r, errMalformed
	}
	h := &r.Hdr
	h.Len = ne.Uint32(msg[0:])
	h.Opcode = ne.Uint32(msg[4:])
	h.Unique = ne.Uint64(msg[8:])
	h.NodeID = ne.Uint64(msg[16:])
	h.UID = ne.Uint32(msg[24:])
	h.GID = ne.Uint32(msg[28:])
	h.PID = ne.Uint32(msg[32:])
	h.TotalExtlen = ne.Uint16(msg[36:])
	h.Padding = ne.Uint16(msg[38:])
	if uint64(h.Len) != uint64(len(msg)) {
		return r, errMalformed
	}
	rest := msg[inHeaderLen:]
	ext := int(h.TotalExtlen) * 8
	if ext > len(rest) {
		return r, errMalformed
	}
	r.Body = rest[:len(rest)-ext]
	r.Ext = rest[len(rest)-ext:]
	return r, nil
}

// encode is the inverse of parseRequest, used by tests and the fuzzer.
func (r request) encode() []byte {
	b := make([]byte, 0, inHeaderLen+len(r.Body)+len(r.Ext))
	b = ne.AppendUint32(b, r.Hdr.Len)
	b = ne.AppendUint32(b, r.Hdr.Opcode)
	b = ne.AppendUint64(b, r.Hdr.Unique)
	b = ne.AppendUint64(b, r.Hdr.NodeID)
	b = ne.AppendUint32(b, r.Hdr.UID)
	b = ne.AppendUint32(b, r.Hdr.GID)
	b = ne.AppendUint32(b, r.Hdr.PID)
	b = ne.AppendUint16(b, r.Hdr.TotalExtlen)
	b = ne.AppendUint16(b, r.Hdr.Padding)
	b = append(b, r.Body...)
	return append(b, r.Ext...)
}

// cursor decodes arguments front to back. Once a read runs past the end it
// is bad, every later read returns zero values, and the caller checks bad
// once at the end.
type cursor struct {
	b   []byte
	bad bool
}

func (c *cursor) take(n int) []byte {
	if c.bad || n < 0 || n > len(c.b) {
		c.bad = true
		return nil
	}
	p := c.b[:n:n]
	c.b = c.b[n:]
	return p
}

func (c *cursor) u32() uint32 {
	if p := c.take(4); !c.bad {
		return ne.Uint32(p)
	}
	return 0
}

func (c *cursor) u64() uint64 {
	if p := c.take(8); !c.bad {
		return ne.Uint64(p)
	}
	return 0
}

// name reads a NUL-terminated, non-empty name.
func (c *cursor) name() string {
	if c.bad {
		return ""
	}
	i := bytes.IndexByte(c.b, 0)
	if i <= 0 {
		c.bad = true
		return ""
	}
	s := string(c.b[:i])
	c.b = c.b[i+1:]
	return s
}

// putOutHeader fills in the fuse_out_header at the start of a successful
// reply b: its length is len(b), its error 0.
func putOutHeader(b []byte, unique uint64) {
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint32(b[4:], 0)
	ne.PutUint64(b[8:], unique)
}

// appendError appends an error reply: a bare fuse_out_header whose error is
// the negated errno.
func appendError(b []byte, unique uint64, errno syscall.Errno) []byte {
	b = ne.AppendUint32(b, outHeaderLen)
	b = ne.AppendUint32(b, uint32(-int32(errno)))
	return ne.AppendUint64(b, unique)
}

// attr is struct fuse_attr.
type attr struct {
	Ino, Size, Blocks, Atime, Mtime, Ctime                 uint64
	AtimeNsec, MtimeNsec, CtimeNsec, Mode, Nlink, UID, GID uint32
	Rdev, Blksize, Flags                                   uint32
}

func appendAttr(b []byte, a *attr) []byte {
	for _, v := range [...]uint64{a.Ino, a.Size, a.Blocks, a.Atime, a.Mtime, a.Ctime} {
		b = ne.AppendUint64(b, v)
	}
	for _, v := range [...]uint32{a.AtimeNsec, a.MtimeNsec, a.CtimeNsec, a.Mode, a.Nlink, a.UID, a.GID, a.Rdev, a.Blksize, a.Flags} {
		b = ne.AppendUint32(b, v)
	}
	return b
}

// appendEntryOut appends struct fuse_entry_out; valid is both the entry and
// the attribute timeout, in seconds.
func appendEntryOut(b []byte, a *attr, valid uint64) []byte {
	b = ne.AppendUint64(b, a.Ino) // nodeid: the inode number is the node id
	b = ne.AppendUint64(b, 0)     // generation
	b = ne.AppendUint64(b, valid) // entry_valid
	b = ne.AppendUint64(b, valid) // attr_valid
	b = ne.AppendUint32(b, 0)     // entry_valid_nsec
	b = ne.AppendUint32(b, 0)     // attr_valid_nsec
	return appendAttr(b, a)
}

// appendAttrOut appends struct fuse_attr_out.
func appendAttrOut(b []byte, a *attr, valid uint64) []byte {
	b = ne.AppendUint64(b, valid) // attr_valid
	b = ne.AppendUint32(b, 0)     // attr_valid_nsec
	b = ne.AppendUint32(b, 0)     // dummy
	return appendAttr(b, a)
}

// appendOpenOut appends struct fuse_open_out with no FOPEN_* flags.
func appendOpenOut(b []byte, fh uint64) []byte {
	b = ne.AppendUint64(b, fh)
	b = ne.AppendUint32(b, 0) // open_flags
	return ne.AppendUint32(b, 0)
}

// appendDirent appends one struct fuse_dirent, padded to 8 bytes.
func appendDirent(b []byte, ino, off uint64, typ uint32, name string) []byte {
	b = ne.AppendUint64(b, ino)
	b = ne.AppendUint64(b, off)
	b = ne.AppendUint32(b, uint32(len(name)))
	b = ne.AppendUint32(b, typ)
	b = append(b, name...)
	for pad := direntLen(name) - direntHeadLen - len(name); pad > 0; pad-- {
		b = append(b, 0)
	}
	return b
}

// direntLen is FUSE_DIRENT_SIZE for a name.
func direntLen(name string) int { return (direntHeadLen + len(name) + 7) &^ 7 }
