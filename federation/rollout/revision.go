package rollout

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// hashAlphabet spells template hashes: digits and consonants only, so a
// hash is a valid label value and never spells a word (as Deployments'
// pod-template-hash avoids vowels).
const hashAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// TemplateHash returns the hash part of a template's revision name: FNV-1a
// (64 bits) over the template's JSON encoding, then the collision count.
//
// JSON rather than a dump of the Go value (what Deployments hash): the
// encoding is the API's own, with sorted map keys and omitted empty fields,
// so it does not change with the Go types' layout or a process restart.
// Revisions are still matched to templates by comparing the templates
// (Identify), never by recomputing a hash, so a library upgrade that
// changed the encoding could not start a rollout by itself.
func TemplateHash(t *corev1.PodTemplateSpec, collisionCount int32) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("encoding the pod template: %w", err)
	}
	h := fnv.New64a()
	_, _ = h.Write(b) // a hash.Hash never fails to write
	if collisionCount != 0 {
		var c [4]byte
		binary.BigEndian.PutUint32(c[:], uint32(collisionCount))
		_, _ = h.Write(c[:])
	}
	return encodeHash(h.Sum64()), nil
}

func encodeHash(v uint64) string {
	n := uint64(len(hashAlphabet))
	var out []byte
	for {
		out = append(out, hashAlphabet[v%n])
		v /= n
		if v == 0 {
			return string(out)
		}
	}
}

// RevisionName is a revision's name: the FederatedReplicaSet's name, a dash
// and the template hash (at most 63 + 1 + 14 characters, a valid object
// name for the revision's MemberReplicaSets and history entries).
func RevisionName(frsName, hash string) string { return frsName + "-" + hash }

// Revision is a template known to the rollout: one in the history or live.
type Revision struct {
	// Name is RevisionName of the template's hash.
	Name string
	// Hash is the template hash (LabelTemplateHash's value).
	Hash string
	// Number counts revisions from 1, as `kubectl rollout history` does.
	Number int64
	// Template is the pod template of the revision.
	Template *corev1.PodTemplateSpec
}

// Identity is what Identify found for a template.
type Identity struct {
	// Revision is the template's revision: an existing one, or a new one with
	// the next number.
	Revision Revision
	// New is true when no known revision had this template.
	New bool
	// CollisionCount is the collision count to record in status: raised by
	// one for each hash taken by a different template.
	CollisionCount int32
}

// Identify finds the revision of template among the known revisions, or
// names a new one. A known revision with an equal template (semantic
// equality, as a Deployment finds its new ReplicaSet) is reused whatever
// its hash. Otherwise the hash with collisionCount names it; while that
// hash belongs to a different template, the count goes up by one, so the
// new revision never takes an old one's name. The result depends only on
// its inputs, so every replica that computes it agrees.
func Identify(frsName string, template *corev1.PodTemplateSpec, collisionCount int32, known []Revision) (Identity, error) {
	var last int64
	for i := range known {
		last = max(last, known[i].Number)
	}
	for i := range known {
		if known[i].Template != nil && equality.Semantic.DeepEqual(known[i].Template, template) {
			return Identity{Revision: known[i], CollisionCount: collisionCount}, nil
		}
	}
	taken := make(map[string]bool, len(known))
	for i := range known {
		taken[known[i].Hash] = true
	}
	// Each loop raises the count by one; it ends after at most len(known)+1
	// rounds, since each round skips a distinct taken hash.
	for {
		h, err := TemplateHash(template, collisionCount)
		if err != nil {
			return Identity{}, err
		}
		if !taken[h] {
			return Identity{
				Revision:       Revision{Name: RevisionName(frsName, h), Hash: h, Number: last + 1, Template: template},
				New:            true,
				CollisionCount: collisionCount,
			}, nil
		}
		collisionCount++
	}
}
