package capacity

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func sampleUsage() Usage {
	return Usage{
		Nodes: map[string]NodeUsage{
			"n1": {Pods: 3, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("3Gi")}},
			"n2": {Pods: 1, Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
			"n3": {Pods: 2, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.0005"), "nvidia.com/gpu": resource.MustParse("2")}},
		},
		Pending: NodeUsage{Pods: 2, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")}},
	}
}

func TestEncodeUsage(t *testing.T) {
	raw, err := EncodeUsage(sampleUsage())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"res":["cpu","memory","nvidia.com/gpu"],"pending":["2","1","2Gi",""],` +
		`"nodes":{"n1":["3","1500m","3Gi",""],"n2":["1","","64Mi",""],"n3":["2","500u","","2"]}}`
	if diff := cmp.Diff(want, string(raw)); diff != "" {
		t.Fatalf("EncodeUsage (-want +got):\n%s", diff)
	}
	again, _ := EncodeUsage(sampleUsage())
	if string(again) != string(raw) {
		t.Fatal("the same usage encoded to different bytes")
	}
	back, err := DecodeUsage(raw)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sampleUsage(), back, quantities); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	empty, err := EncodeUsage(Usage{})
	if err != nil || string(empty) != `{"v":1}` {
		t.Fatalf("EncodeUsage(empty) = %s, %v; want {\"v\":1}", empty, err)
	}
	if _, err := EncodeUsage(Usage{Pending: NodeUsage{Pods: -1}}); err == nil || !strings.Contains(err.Error(), "negative pod count") {
		t.Fatalf("EncodeUsage of a negative count: %v, want it refused", err)
	}
}

// A member far past Kubernetes' 5,000-node limit does not fit one command
// and is refused, not cut.
func TestEncodeUsageTooLarge(t *testing.T) {
	big := func(nodes int) Usage {
		u := Usage{Nodes: map[string]NodeUsage{}}
		for i := range nodes {
			u.Nodes[fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", i/256, i%256)] = NodeUsage{Pods: 110,
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3500m"), corev1.ResourceMemory: resource.MustParse("12Gi")}}
		}
		return u
	}
	if raw, err := EncodeUsage(big(5000)); err != nil {
		t.Fatalf("5,000 nodes: %v", err)
	} else if len(raw) > MaxUsageSize {
		t.Fatalf("5,000 nodes: %d bytes", len(raw))
	}
	if _, err := EncodeUsage(big(20000)); !errors.Is(err, ErrUsageTooLarge) {
		t.Fatalf("20,000 nodes: %v, want ErrUsageTooLarge", err)
	}
}

// TestDecodeUsageRefuses hostile and broken input, each with an error
// saying what is wrong.
func TestDecodeUsageRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", ``, "unexpected end of JSON input"},
		{"not JSON", `garbage`, "invalid character"},
		{"not an object", `[1,2]`, "cannot unmarshal array"},
		{"no version", `{"nodes":{}}`, "no version"},
		{"newer version", `{"v":2,"future":true}`, "version 2, this replica reads only version 1"},
		{"version zero", `{"v":0}`, "version 0"},
		{"version not a number", `{"v":"1"}`, "cannot unmarshal string"},
		{"unknown field", `{"v":1,"extra":1}`, `unknown field "extra"`},
		{"trailing data", `{"v":1} {"v":1}`, "after top-level value"},
		{"row too short", `{"v":1,"res":["cpu"],"nodes":{"n1":["1"]}}`, `node "n1": 1 values, want 2`},
		{"row too long", `{"v":1,"nodes":{"n1":["1","2"]}}`, `node "n1": 2 values, want 1`},
		{"empty row", `{"v":1,"pending":[]}`, "pending pods: 0 values, want 1"},
		{"pod count not a number", `{"v":1,"nodes":{"n1":["x"]}}`, `node "n1": pod count: strconv.ParseInt`},
		{"pod count overflows", `{"v":1,"nodes":{"n1":["99999999999999999999"]}}`, "value out of range"},
		{"negative pod count", `{"v":1,"nodes":{"n1":["-1"]}}`, `node "n1": negative pod count -1`},
		{"negative pending", `{"v":1,"pending":["-5"]}`, "pending pods: negative pod count -5"},
		{"bad quantity", `{"v":1,"res":["cpu"],"nodes":{"n1":["1","lots"]}}`, `node "n1": cpu request: quantities must match`},
		{"negative quantity", `{"v":1,"res":["cpu"],"nodes":{"n1":["1","-1"]}}`, `node "n1": negative cpu request -1`},
		{"requests without pods", `{"v":1,"res":["cpu"],"nodes":{"n1":["0","1"]}}`, `node "n1": cpu requested by no pod`},
		{"empty node name", `{"v":1,"nodes":{"":["1"]}}`, "a node with an empty name"},
		{"repeated resource", `{"v":1,"res":["cpu","cpu"]}`, `resource column "cpu" empty or repeated`},
		{"empty resource", `{"v":1,"res":[""]}`, `resource column "" empty or repeated`},
		{"row not strings", `{"v":1,"nodes":{"n1":[1]}}`, "cannot unmarshal number"},
		{"too large", `{"v":1,"nodes":{"` + strings.Repeat("x", MaxUsageSize) + `":["1"]}}`, "larger than 512 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeUsage([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeUsage(%.60q) = %v, want an error containing %q", tc.in, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "decoding usage") {
				t.Errorf("error %q does not say it was decoding a usage", err)
			}
		})
	}
}

// FuzzDecodeUsage: whatever the input, decoding neither panics nor accepts
// what could not be a usage, and what it accepts encodes and decodes to
// the same usage.
func FuzzDecodeUsage(f *testing.F) {
	raw, _ := EncodeUsage(sampleUsage())
	f.Add(raw)
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":1,"res":["cpu"],"pending":["1","1e3"]}`))
	f.Add([]byte(`{"v":1,"res":["cpu"],"nodes":{"n":["1","9223372036854775807"]}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		u, err := DecodeUsage(in)
		if err != nil {
			return
		}
		if err := u.Validate(); err != nil {
			t.Fatalf("decoded an invalid usage: %v", err)
		}
		again, err := EncodeUsage(u)
		if err != nil {
			t.Fatalf("a decoded usage does not encode: %v", err)
		}
		back, err := DecodeUsage(again)
		if err != nil {
			t.Fatalf("a re-encoded usage does not decode: %v", err)
		}
		if diff := cmp.Diff(u, back, quantities); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
