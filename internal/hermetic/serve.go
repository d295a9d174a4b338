package hermetic

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"strconv"
)

// writeRefusal answers a refusal: the status, one line of plain text
// giving the reason, and the connection closed after it. A refusal the
// recording holds is written by the same function when it is first made
// and whenever it is replayed, so the client reads the same bytes.
func writeRefusal(w http.ResponseWriter, status int, reason string) {
	body := "proctor hermetic: " + clean(reason) + "\n"
	h := w.Header()
	clear(h)
	h["Date"] = nil
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Connection", "close")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// writeExchange answers a request with a recorded exchange, its body read
// from root. The headers are the recorded ones and the framing: no Date,
// no sniffed Content-Type, nothing else. A body that is not the recorded
// one is found by the time its last 64 KiB would be sent: they are not
// sent, and the error (a *BlobError) returned; the caller must then cut
// the connection. It returns the body bytes sent.
func writeExchange(w http.ResponseWriter, method string, e *Exchange, root *os.Root) (int64, error) {
	if e.Refused != "" {
		writeRefusal(w, e.Status, e.Refused)
		return 0, nil
	}
	var f *os.File
	b := Blob{SHA256: e.BodySHA256, Size: e.BodyBytes}
	if e.BodyBytes > 0 && method != http.MethodHead {
		var err error
		if f, err = openBlob(root, b); err != nil {
			writeRefusal(w, http.StatusBadGateway, "the recorded body is unusable")
			return 0, err
		}
		defer f.Close()
	}
	h := w.Header()
	clear(h)
	h["Date"] = nil
	h["Content-Type"] = nil
	for _, kv := range e.Header {
		h[kv[0]] = append(h[kv[0]], kv[1])
	}
	if method != http.MethodHead && e.Status != http.StatusNoContent && e.Status != http.StatusNotModified {
		h["Content-Length"] = []string{strconv.FormatInt(e.BodyBytes, 10)}
	}
	w.WriteHeader(e.Status)
	if f == nil {
		return 0, nil
	}
	return copyVerified(w, f, b)
}

// copyVerified copies f to w, hashing it, holding back the last chunk
// read until the whole file has been seen to be b.
func copyVerified(w io.Writer, f io.Reader, b Blob) (int64, error) {
	h := sha256.New()
	bufs := [2][]byte{make([]byte, 64<<10), make([]byte, 64<<10)}
	var pending []byte
	var sent, seen int64
	for i := 0; ; i ^= 1 {
		n, err := io.ReadFull(f, bufs[i])
		if n > 0 {
			h.Write(bufs[i][:n])
			seen += int64(n)
			if len(pending) > 0 {
				m, werr := w.Write(pending)
				sent += int64(m)
				if werr != nil {
					return sent, werr
				}
			}
			pending = bufs[i][:n]
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return sent, err
		}
		if seen > b.Size {
			break
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != b.SHA256 || seen != b.Size {
		return sent, &BlobError{SHA256: b.SHA256, Reason: "changed since it was checked", Err: ErrTampered}
	}
	m, err := w.Write(pending)
	return sent + int64(m), err
}
