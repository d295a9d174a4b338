package seccomp

import (
	"net"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkNotifyConnect measures one connect(2) of a UDP socket to
// 127.0.0.1 (no handshake: the call only sets the peer), without the
// notify filter and with it, the supervisor answering through Watch with
// and without SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP. The notified runs happen
// in a helper child; the child times its own loop and the benchmark
// reports that as ns/op.
func BenchmarkNotifyConnect(b *testing.B) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	port := pc.LocalAddr().(*net.UDPAddr).Port

	b.Run("plain", func(b *testing.B) {
		s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(s)
		lo := &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
		for b.Loop() {
			if err := unix.Connect(s, lo); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name     string
		syncWake bool
	}{{"notified", false}, {"notified-syncwake", true}} {
		b.Run(c.name, func(b *testing.B) {
			requireNotify(b)
			child := startNotifyChild(b, notifyModeBench,
				envUDP+"="+strconv.Itoa(port), envN+"="+strconv.Itoa(b.N))
			done := make(chan error, 1)
			go func() { done <- watch(child.listener, func(Attempt) {}, c.syncWake) }()
			child.goAhead(b)
			res := child.results(b)
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			ns, err := strconv.ParseFloat(res["elapsed"], 64)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(ns/float64(b.N), "ns/op")
		})
	}
}
