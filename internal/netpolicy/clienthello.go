package netpolicy

import (
	"errors"
	"strconv"
)

// TLS constants used by the ClientHello parser.
const (
	recordTypeHandshake  = 0x16
	handshakeClientHello = 0x01
	recordHeaderLen      = 5
	maxRecordPayload     = 1 << 14 // TLSPlaintext.length limit (RFC 8446 section 5.1)

	extServerName = 0x0000
	extECH        = 0xfe0d // encrypted_client_hello (RFC 9849)
	extESNI       = 0xffce // draft encrypted_server_name
	sniHostName   = 0x00

	// maxHello caps the bytes read while looking for a complete
	// ClientHello: record headers and handshake message together. A
	// ClientHello with a post-quantum key share is about 1.8 KiB.
	maxHello = 16 << 10
)

// errShortHello means the bytes end before the ClientHello does: read
// more and call parseClientHello again.
var errShortHello = errors.New("ClientHello incomplete")

// errTooLarge means the records carrying the ClientHello would pass
// maxHello bytes.
var errTooLarge = errors.New("ClientHello records larger than 16 KiB")

// clientHello is what the proxy needs from a TLS ClientHello.
type clientHello struct {
	serverName string // the host_name of server_name, as sent
	hasSNI     bool
	ech        bool // an encrypted_client_hello or draft ESNI extension is present
	length     int  // bytes of records that carried the ClientHello
}

// parseClientHello parses the TLS records at the start of b that carry
// a ClientHello handshake message. The message may be split over several
// records; the records must all be handshake records and must carry
// nothing after the ClientHello. It returns errShortHello when b ends
// too early, and another error for anything malformed, including a
// ClientHello whose records would go past maxHello bytes.
func parseClientHello(b []byte) (clientHello, error) {
	var msg []byte // the handshake message so far, across records
	off := 0
	for {
		if off+recordHeaderLen > maxHello {
			return clientHello{}, errTooLarge
		}
		if len(b)-off < recordHeaderLen {
			return clientHello{}, errShortHello
		}
		h := b[off : off+recordHeaderLen]
		if h[0] != recordTypeHandshake {
			return clientHello{}, errors.New("record type " + strconv.Itoa(int(h[0])) + " before the ClientHello ended")
		}
		if h[1] != 3 || h[2] > 4 {
			return clientHello{}, errors.New("bad record version")
		}
		n := int(h[3])<<8 | int(h[4])
		if n == 0 || n > maxRecordPayload {
			return clientHello{}, errors.New("bad record length " + strconv.Itoa(n))
		}
		end := off + recordHeaderLen + n
		if end > maxHello {
			return clientHello{}, errTooLarge
		}
		if len(b) < end {
			return clientHello{}, errShortHello
		}
		msg = append(msg, b[off+recordHeaderLen:end]...)
		off = end
		if len(msg) < 4 {
			continue
		}
		if msg[0] != handshakeClientHello {
			return clientHello{}, errors.New("handshake message type " + strconv.Itoa(int(msg[0])) + ", not ClientHello")
		}
		mlen := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if 4+mlen > maxHello {
			return clientHello{}, errors.New("ClientHello larger than 16 KiB")
		}
		if len(msg) < 4+mlen {
			continue
		}
		if len(msg) > 4+mlen {
			return clientHello{}, errors.New("data after the ClientHello in its record")
		}
		ch, err := parseClientHelloBody(msg[4:])
		if err != nil {
			return clientHello{}, err
		}
		ch.length = off
		return ch, nil
	}
}

// reader reads big-endian fields from a byte slice; every read checks
// the length, and a failed read leaves ok false for good.
type reader struct {
	b  []byte
	ok bool
}

func (r *reader) bytes(n int) []byte {
	if !r.ok || n < 0 || len(r.b) < n {
		r.ok = false
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() int {
	v := r.bytes(1)
	if v == nil {
		return 0
	}
	return int(v[0])
}

func (r *reader) u16() int {
	v := r.bytes(2)
	if v == nil {
		return 0
	}
	return int(v[0])<<8 | int(v[1])
}

// vec reads a vector with a length prefix of 1 or 2 bytes.
func (r *reader) vec(lenBytes int) []byte {
	var n int
	if lenBytes == 1 {
		n = r.u8()
	} else {
		n = r.u16()
	}
	return r.bytes(n)
}

var errMalformedHello = errors.New("malformed ClientHello")

// parseClientHelloBody parses a ClientHello body (RFC 8446 section 4.1.2,
// RFC 5246 section 7.4.1.2) and its server_name extension (RFC 6066
// section 3).
func parseClientHelloBody(b []byte) (clientHello, error) {
	r := &reader{b: b, ok: true}
	r.bytes(2)  // legacy_version
	r.bytes(32) // random
	if sid := r.vec(1); len(sid) > 32 {
		return clientHello{}, errMalformedHello
	}
	if cs := r.vec(2); r.ok && (len(cs) < 2 || len(cs)%2 != 0) {
		return clientHello{}, errMalformedHello
	}
	if cm := r.vec(1); r.ok && len(cm) < 1 {
		return clientHello{}, errMalformedHello
	}
	if !r.ok {
		return clientHello{}, errMalformedHello
	}
	var ch clientHello
	if len(r.b) == 0 {
		return ch, nil // no extensions
	}
	exts := &reader{b: r.vec(2), ok: r.ok}
	if !r.ok || len(r.b) != 0 {
		return clientHello{}, errMalformedHello
	}
	seen := make(map[int]bool)
	for len(exts.b) > 0 {
		typ := exts.u16()
		data := exts.vec(2)
		if !exts.ok {
			return clientHello{}, errMalformedHello
		}
		if seen[typ] {
			return clientHello{}, errors.New("duplicate extension " + strconv.Itoa(typ) + " in ClientHello")
		}
		seen[typ] = true
		switch typ {
		case extServerName:
			name, err := parseServerName(data)
			if err != nil {
				return clientHello{}, err
			}
			ch.serverName, ch.hasSNI = name, true
		case extECH, extESNI:
			ch.ech = true
		}
	}
	return ch, nil
}

// parseServerName parses the server_name extension's data and returns
// its one host_name.
func parseServerName(b []byte) (string, error) {
	r := &reader{b: b, ok: true}
	list := &reader{b: r.vec(2), ok: r.ok}
	if !r.ok || len(r.b) != 0 || len(list.b) == 0 {
		return "", errors.New("malformed server_name extension")
	}
	var name []byte
	found := false
	for len(list.b) > 0 {
		typ := list.u8()
		v := list.vec(2)
		if !list.ok {
			return "", errors.New("malformed server_name extension")
		}
		if typ != sniHostName {
			continue
		}
		if found {
			return "", errors.New("more than one host_name in server_name extension")
		}
		if len(v) == 0 {
			return "", errors.New("empty host_name in server_name extension")
		}
		name, found = v, true
	}
	if !found {
		return "", errors.New("server_name extension without a host_name")
	}
	return string(name), nil
}
