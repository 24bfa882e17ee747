package secretscan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/replicafed/replicafed/internal/test/testpki"
)

func TestScan(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.Issue(dir, "r1")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	keyLine := strings.Split(string(key), "\n")[1]

	s := New()
	s.Add("short-token", "ignored: too short")
	s.Add("a-long-enough-admin-token", "admin token")
	if err := s.AddPEMFile(files.KeyFile, "private key of r1"); err != nil {
		t.Fatal(err)
	}
	log := strings.Join([]string{
		"Started",
		"token=a-long-enough-admin-token",
		"short-token is fine",
		"partial key " + keyLine,
		"-----BEGIN EC PRIVATE KEY-----",
	}, "\n")
	got, err := s.Scan(strings.NewReader(log), "r1.log")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"r1.log line 2: admin token",
		"r1.log line 4: private key of r1",
		"r1.log line 5: a PEM private key header",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Scan (-want +got):\n%s", diff)
	}

	if err := s.AddPEMFile(filepath.Join(dir, "missing.key"), "x"); err == nil {
		t.Fatal("a missing key file was accepted")
	}
	notPEM := filepath.Join(dir, "plain.txt")
	if err := os.WriteFile(notPEM, []byte("no pem here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPEMFile(notPEM, "x"); err == nil {
		t.Fatal("a file without PEM was accepted")
	}
}
