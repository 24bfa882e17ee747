package capacity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// UsageVersion is the version of the encoding EncodeUsage writes and the
// only one DecodeUsage reads.
const UsageVersion = 1

// MaxUsageSize bounds an encoded Usage (512 KiB, what the raft command
// carrying it accepts per member). At about 25 bytes per node plus the
// node's name (cpu and memory requested), a member of 5,000 nodes
// (Kubernetes' tested limit) with 41-character names takes 330 KB.
const MaxUsageSize = 512 << 10

// ErrUsageTooLarge is returned (wrapped) for a usage above MaxUsageSize.
var ErrUsageTooLarge = errors.New("encoded usage larger than 512 KiB")

// wireUsage is the encoding: JSON, columns instead of one object per node,
// so a node costs its name and one row. Res names the resources in column
// order; each row is [pod count, quantity of Res[0], quantity of Res[1],
// ...], the pod count a decimal integer and each quantity in the canonical
// Kubernetes form ("1500m", "3Gi"), which keeps sums exact (milli-values
// would round a "0.0005" cpu request), or "" when no pod of the row
// requests that resource. Pending is the row of the pods not bound yet,
// omitted when there are none. For example:
//
//	{"v":1,"res":["cpu","memory"],"pending":["2","1","2Gi"],
//	 "nodes":{"n1":["3","1500m","3Gi"],"n2":["1","","64Mi"]}}
type wireUsage struct {
	V       int                 `json:"v"`
	Res     []string            `json:"res,omitempty"`
	Pending []string            `json:"pending,omitempty"`
	Nodes   map[string][]string `json:"nodes,omitempty"`
}

// EncodeUsage encodes u (see wireUsage for the format), the same bytes for
// the same usage, so a publisher can skip an unchanged one. It refuses a
// usage Validate refuses or one that encodes to more than MaxUsageSize.
func EncodeUsage(u Usage) ([]byte, error) {
	if err := u.Validate(); err != nil {
		return nil, fmt.Errorf("encoding usage: %w", err)
	}
	w := wireUsage{V: UsageVersion, Res: resourceColumns(u)}
	if u.Pending.Pods > 0 || len(u.Pending.Requests) > 0 {
		w.Pending = row(u.Pending, w.Res)
	}
	if len(u.Nodes) > 0 {
		w.Nodes = make(map[string][]string, len(u.Nodes))
		for name, nu := range u.Nodes {
			w.Nodes[name] = row(nu, w.Res)
		}
	}
	raw, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encoding usage: %w", err)
	}
	if len(raw) > MaxUsageSize {
		return nil, fmt.Errorf("encoding usage of %d nodes (%d bytes): %w", len(u.Nodes), len(raw), ErrUsageTooLarge)
	}
	return raw, nil
}

// resourceColumns names every resource u requests, sorted.
func resourceColumns(u Usage) []string {
	seen := map[corev1.ResourceName]bool{}
	for name := range u.Pending.Requests {
		seen[name] = true
	}
	for _, nu := range u.Nodes {
		for name := range nu.Requests {
			seen[name] = true
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, string(name))
	}
	slices.Sort(out)
	return out
}

func row(nu NodeUsage, res []string) []string {
	out := make([]string, 1+len(res))
	out[0] = strconv.FormatInt(nu.Pods, 10)
	for i, name := range res {
		if q, ok := nu.Requests[corev1.ResourceName(name)]; ok {
			out[1+i] = q.String()
		}
	}
	return out
}

// DecodeUsage decodes what EncodeUsage wrote. It refuses, with an error
// saying why, input above MaxUsageSize, another version, malformed JSON,
// unknown fields, trailing data, rows of the wrong length, bad or negative
// numbers and whatever Validate refuses.
func DecodeUsage(raw []byte) (Usage, error) {
	if len(raw) > MaxUsageSize {
		return Usage{}, fmt.Errorf("decoding usage (%d bytes): %w", len(raw), ErrUsageTooLarge)
	}
	// The version first, leniently: a newer version may have fields this
	// one does not know, and deserves the version error, not a field error.
	// Unmarshal also refuses anything after the object.
	var head struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return Usage{}, fmt.Errorf("decoding usage: %w", err)
	}
	if head.V == nil {
		return Usage{}, fmt.Errorf("decoding usage: no version")
	}
	if *head.V != UsageVersion {
		return Usage{}, fmt.Errorf("decoding usage: version %d, this replica reads only version %d", *head.V, UsageVersion)
	}
	var w wireUsage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Usage{}, fmt.Errorf("decoding usage: %w", err)
	}
	u, err := fromWire(&w)
	if err != nil {
		return Usage{}, fmt.Errorf("decoding usage: %w", err)
	}
	return u, nil
}

// fromWire turns the decoded columns back into a Usage and validates it.
func fromWire(w *wireUsage) (Usage, error) {
	seen := make(map[string]bool, len(w.Res))
	for _, name := range w.Res {
		if name == "" || seen[name] {
			return Usage{}, fmt.Errorf("resource column %q empty or repeated", name)
		}
		seen[name] = true
	}
	u := Usage{Nodes: make(map[string]NodeUsage, len(w.Nodes))}
	if w.Pending != nil {
		nu, err := parseRow(w.Pending, w.Res)
		if err != nil {
			return Usage{}, fmt.Errorf("pending pods: %w", err)
		}
		u.Pending = nu
	}
	for name, r := range w.Nodes {
		nu, err := parseRow(r, w.Res)
		if err != nil {
			return Usage{}, fmt.Errorf("node %q: %w", name, err)
		}
		u.Nodes[name] = nu
	}
	if err := u.Validate(); err != nil {
		return Usage{}, err
	}
	return u, nil
}

func parseRow(r, res []string) (NodeUsage, error) {
	if len(r) != 1+len(res) {
		return NodeUsage{}, fmt.Errorf("%d values, want %d (the pod count and %d resources)", len(r), 1+len(res), len(res))
	}
	pods, err := strconv.ParseInt(r[0], 10, 64)
	if err != nil {
		return NodeUsage{}, fmt.Errorf("pod count: %w", err)
	}
	nu := NodeUsage{Pods: pods, Requests: corev1.ResourceList{}}
	for i, name := range res {
		if r[1+i] == "" {
			continue
		}
		q, err := resource.ParseQuantity(r[1+i])
		if err != nil {
			return NodeUsage{}, fmt.Errorf("%s request: %w", name, err)
		}
		nu.Requests[corev1.ResourceName(name)] = q
	}
	return nu, nil
}
