// Package secretscan looks for secret material in logs: tokens, and every
// line of a PEM private key, so a key logged in part is found too. Tests use
// it to prove that no log line gives a secret away.
package secretscan

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// minLen is the shortest secret looked for: shorter strings would match by
// chance.
const minLen = 16

// pemHeader marks a PEM private key of any kind.
const pemHeader = "PRIVATE KEY"

// Secrets is the material to look for, each with what it is.
type Secrets struct {
	what map[string]string
}

// New returns an empty set.
func New() *Secrets { return &Secrets{what: map[string]string{}} }

// Len is the number of secrets looked for.
func (s *Secrets) Len() int { return len(s.what) }

// Add looks for secret, reported as what; secrets shorter than 16 bytes are
// left out.
func (s *Secrets) Add(secret, what string) {
	if len(secret) >= minLen {
		s.what[secret] = what
	}
}

// AddPEM looks for every body line of the PEM data b, reported as what. Data
// that leaves nothing to look for (no body line of 16 bytes or more) is an
// error, so a scan never passes for want of secrets.
func (s *Secrets) AddPEM(b []byte, what string) error {
	added := 0
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if len(line) >= minLen && !strings.HasPrefix(line, "-----") {
			s.what[line] = what
			added++
		}
	}
	if added == 0 {
		return fmt.Errorf("%s: no PEM body to look for", what)
	}
	return nil
}

// AddPEMFile looks for every body line of the PEM file at path, reported as
// what.
func (s *Secrets) AddPEMFile(path, what string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if err := s.AddPEM(b, what); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

// Scan reads the log r, named name in findings, and returns one finding per
// line and secret found, and per PEM private key header, each saying where
// and what, never the secret itself.
func (s *Secrets) Scan(r io.Reader, name string) ([]string, error) {
	var found []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.Contains(line, pemHeader) {
			found = append(found, fmt.Sprintf("%s line %d: a PEM private key header", name, n))
		}
		for secret, what := range s.what {
			if strings.Contains(line, secret) {
				found = append(found, fmt.Sprintf("%s line %d: %s", name, n, what))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return found, fmt.Errorf("reading %s: %w", name, err)
	}
	return found, nil
}

// ScanFile scans the log file at path (see Scan).
func (s *Secrets) ScanFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	return s.Scan(f, path)
}
