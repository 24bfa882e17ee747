package fleet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsInLogs: the scan finds each kind of planted secret and nothing
// in a clean log.
func TestSecretsInLogs(t *testing.T) {
	dir := t.TempDir()
	key := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIAbcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHoAoGCCqGSM49\n-----END EC PRIVATE KEY-----\n"
	keyFile := filepath.Join(dir, "tls.key")
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	token := "0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		name, log string
		want      []string
	}{
		{"clean", `{"msg":"Leading","term":3}` + "\n", nil},
		{"token", `{"msg":"Request","authorization":"Bearer ` + token + `"}` + "\n", []string{"admin token"}},
		{"key line", "MHcCAQEEIAbcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHoAoGCCqGSM49\n", []string{"private key of r0"}},
		{"pem header", "-----BEGIN EC PRIVATE KEY-----\n", []string{"PEM private key header"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			logPath := filepath.Join(dir, c.name+".log")
			if err := os.WriteFile(logPath, []byte(c.log), 0o600); err != nil {
				t.Fatal(err)
			}
			f := &Fleet{Replicas: []*Replica{{ID: "r0", LogPath: logPath, adminToken: token, keyFile: keyFile}}}
			found, err := f.SecretsInLogs(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != len(c.want) {
				t.Fatalf("found %q, want %d findings %q", found, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(found[i], w) {
					t.Errorf("finding %q does not name %q", found[i], w)
				}
				if strings.Contains(found[i], token) {
					t.Errorf("finding repeats the secret: %q", found[i])
				}
			}
		})
	}
}
