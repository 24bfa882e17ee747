package node

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// identity is persisted in the data dir so a restarted pod keeps its raft
// server ID, and a volume from another cluster is recognised.
type identity struct {
	ClusterID string `json:"clusterID"`
	Name      string `json:"name"`
	UUID      string `json:"uuid"`
}

const identityFile = "identity.json"

// ErrForeignDataDir is returned when the data dir belongs to another raft
// cluster or another replica.
var ErrForeignDataDir = errors.New("data dir belongs to another raft cluster or replica")

func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

func loadIdentity(dir, clusterID, name string) (identity, error) {
	path := filepath.Join(dir, identityFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var id identity
		if err := json.Unmarshal(b, &id); err != nil || id.UUID == "" {
			return identity{}, fmt.Errorf("reading %s: corrupt identity file", path)
		}
		if id.ClusterID != clusterID || id.Name != name {
			return identity{}, fmt.Errorf("%w: %s was written by replica %q of raft cluster %q, this is replica %q of cluster %q; "+
				"refusing to start (point dataDir at this cluster's volume, or empty it to join as a new server)",
				ErrForeignDataDir, dir, id.Name, id.ClusterID, name, clusterID)
		}
		return id, nil
	case errors.Is(err, os.ErrNotExist):
		if _, err := os.Stat(filepath.Join(dir, logFile)); err == nil {
			return identity{}, fmt.Errorf("%w: %s holds a raft log but no %s; refusing to start", ErrForeignDataDir, dir, identityFile)
		}
		u, err := newUUID()
		if err != nil {
			return identity{}, fmt.Errorf("generating server UUID: %w", err)
		}
		id := identity{ClusterID: clusterID, Name: name, UUID: u}
		b, _ := json.Marshal(id)
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return identity{}, fmt.Errorf("writing %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return identity{}, fmt.Errorf("writing %s: %w", path, err)
		}
		return id, nil
	default:
		return identity{}, fmt.Errorf("reading %s: %w", path, err)
	}
}

// serverName strips the UUID suffix from a raft server ID ("name-<uuid>").
func serverName(id string) string {
	const uuidLen = 36
	if len(id) > uuidLen+1 && id[len(id)-uuidLen-1] == '-' {
		return id[:len(id)-uuidLen-1]
	}
	return id
}
