package bundle_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/proctor-sandbox/proctor/internal/bundle"
)

// Sign a trial's payload and verify the bundle as a stranger would, with
// the bundle, the signer's public key and the artifacts.
func Example() {
	// In real use: bundle.GenerateKey and bundle.WriteKeyFiles once, then
	// bundle.ReadPrivateKey. A fixed seed keeps this example's output fixed.
	seed := sha256.Sum256([]byte("example"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)

	dir, err := os.MkdirTemp("", "bundle-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "agent.log"), []byte("hello\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	var tl bundle.Timeline
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tl.Append("trial.start", map[string]string{"task": "hello-world"}, start)
	tl.Append("trial.end", map[string]string{"status": "clean"}, start.Add(90*time.Second))

	p := &bundle.Payload{
		Schema:   bundle.Schema,
		Timeline: tl.Events(),
		Provenance: bundle.Provenance{
			TaskDigest:        "sha256:" + fmt.Sprintf("%x", sha256.Sum256([]byte("task"))),
			EnvironmentDigest: "sha256:" + fmt.Sprintf("%x", sha256.Sum256([]byte("rootfs"))),
			Agent:             bundle.Agent{Command: "my-agent --task /proctor/instruction.md", EnvNames: []string{"HOME", "PATH"}},
			Proctor:           bundle.ProctorBuild{Version: "v0.1.0", Go: "go1.26.8"},
			Host:              bundle.Host{Kernel: "6.8.0", Platform: "linux/amd64", Isolation: []string{"pid-namespace", "seccomp"}},
		},
	}
	if err := p.SetVerdict(map[string]any{"passed": true, "status": "clean", "reward": 1.0}); err != nil {
		log.Fatal(err)
	}
	if p.Manifest, err = bundle.HashArtifacts(dir, "agent.log"); err != nil {
		log.Fatal(err)
	}
	data, err := bundle.Sign(p, priv)
	if err != nil {
		log.Fatal(err)
	}

	got, err := bundle.Verify(data, bundle.WithPublicKey(pub), bundle.WithArtifactDir(dir), bundle.WithRequireArtifacts())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(bundle.Summary(got))

	// Any change to a signed value is caught.
	if err := os.WriteFile(filepath.Join(dir, "agent.log"), []byte("HELLO\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	_, err = bundle.Verify(data, bundle.WithPublicKey(pub), bundle.WithArtifactDir(dir))
	var verr *bundle.VerifyError
	if errors.As(err, &verr) && errors.Is(err, bundle.ErrTampered) {
		fmt.Println("tampered:", verr.Field)
	}
	// Output:
	// verdict:  passed (status clean, reward 1)
	// task:     sha256:0ebb429fa86d481c2630fac53db1c91cffed5d4d41d1021c179444eb67e7ee0b
	// agent:    my-agent --task /proctor/instruction.md
	// env:      sha256:3c47ef972d531d524daa15fa33dd885dd23de6221bbd10a29eb42ecfcf2ef422
	// signer:   SHA256://e0fWjWFR11qKingIXjAegPXMlmVQQX+YLUWhgYR4Y
	// contents: 2 timeline events, 1 artifacts
	// tampered: artifact agent.log
}

func ExampleFingerprint() {
	seed := sha256.Sum256([]byte("example"))
	pub := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
	fmt.Println(bundle.Fingerprint(pub))
	// Output: SHA256://e0fWjWFR11qKingIXjAegPXMlmVQQX+YLUWhgYR4Y
}
