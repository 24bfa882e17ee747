package main

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         requestKind
	}{
		{"POST", "/api/v1/namespaces/bench/pods", requestKind{"create", "pods"}},
		{"DELETE", "/api/v1/namespaces/bench/pods/web-1", requestKind{"delete", "pods"}},
		{"DELETE", "/api/v1/namespaces/bench/pods", requestKind{"deletecollection", "pods"}},
		{"PATCH", "/api/v1/namespaces/bench/pods/web-1/status", requestKind{"patch", "pods/status"}},
		{"PUT", "/apis/apps/v1/namespaces/bench/replicasets/rs/status", requestKind{"update", "apps/replicasets/status"}},
		{"PUT", "/apis/replicafed.io/v1alpha1/namespaces/bench/memberreplicasets/m", requestKind{"update", "replicafed.io/memberreplicasets"}},
		{"POST", "/apis/events.k8s.io/v1/namespaces/bench/events", requestKind{"create", "events.k8s.io/events"}},
		{"GET", "/api/v1/pods?watch=true&resourceVersion=5", requestKind{"watch", "pods"}},
		{"GET", "/api/v1/namespaces/bench/pods?labelSelector=a%3Db", requestKind{"list", "pods"}},
		{"GET", "/api/v1/namespaces/bench/pods/web-1", requestKind{"get", "pods"}},
		{"GET", "/api/v1/nodes/n1", requestKind{"get", "nodes"}},
		{"GET", "/api/v1/namespaces/bench", requestKind{"get", "namespaces"}},
		{"GET", "/api/v1/namespaces", requestKind{"list", "namespaces"}},
		{"GET", "/apis", requestKind{"get", "-"}},
		{"GET", "/version", requestKind{"get", "-"}},
	} {
		u, err := url.Parse(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := classify(c.method, u); got != c.want {
			t.Errorf("classify(%s %s) = %+v, want %+v", c.method, c.path, got, c.want)
		}
	}
}

func TestCountsWrites(t *testing.T) {
	c := counts{{"create", "pods"}: 100, {"patch", "events"}: 3, {"watch", "pods"}: 2, {"list", "pods"}: 1, {"update", "apps/replicasets/status"}: 4}
	if got := c.writes(); got != 107 {
		t.Errorf("writes() = %d, want 107", got)
	}
	if got, want := c.writeSummary(), "create pods 100, update apps/replicasets/status 4, patch events 3"; got != want {
		t.Errorf("writeSummary() = %q, want %q", got, want)
	}
}

func TestParseStatCPU(t *testing.T) {
	// Fields after the name: state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime ...
	stat := "4242 (kube controller) S 1 4242 4242 0 -1 4194560 9000 0 3 0 250 75 0 0 20 0 12 0 100 0 0"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3250 * time.Millisecond; got != want {
		t.Errorf("parseStatCPU = %v, want %v", got, want)
	}
	if _, err := parseStatCPU("4242 (x) S 1"); err == nil {
		t.Error("a short stat line parsed")
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tkcm\nVmHWM:\t  80340 kB\nVmRSS:\t   70000 kB\n"
	if got := parseStatusKB(status, "VmHWM:"); got != 80340*1024 {
		t.Errorf("VmHWM = %d", got)
	}
	if got := parseStatusKB(status, "VmSwap:"); got != 0 {
		t.Errorf("missing key = %d, want 0", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestParseScale(t *testing.T) {
	if n, err := parseScale("SCALE 1000"); err != nil || n != 1000 {
		t.Errorf("parseScale(SCALE 1000) = %d, %v", n, err)
	}
	for _, bad := range []string{"", "SCALE", "SCALE -1", "SCALE x", "GROW 5"} {
		if _, err := parseScale(bad); err == nil {
			t.Errorf("parseScale(%q) accepted", bad)
		}
	}
}

func TestMarkdownRatiosAndGoals(t *testing.T) {
	run := func(ctrl, st string, created time.Duration, writes int) result {
		return result{Setting: st, Controller: ctrl, Pods: 1000, Created: created, Window: counts{{"create", "pods"}: writes},
			CPU: 2 * time.Second, PeakRSS: 100 << 20, RSSBefore: 60 << 20}
	}
	rep := report{Pods: 1000, Pairs: 2, Settings: []setting{knownSettings["qps20"], knownSettings["unlimited"]}, Results: []result{
		run(kcm, "qps20", 50*time.Second, 1000), run(replicafed, "qps20", 40*time.Second, 1000),
		run(kcm, "qps20", 50*time.Second, 1000), run(replicafed, "qps20", 60*time.Second, 1000),
		run(kcm, "unlimited", 10*time.Second, 1000), run(replicafed, "unlimited", 20*time.Second, 1000),
	}}
	md := rep.markdown()
	for _, want := range []string{
		// Medians: replicafed 1000/40 and 1000/60 give 20.8 pods/s against 20.0.
		"| qps 20 / burst 30 | replicafed | 20.8 |",
		"| qps 20 / burst 30 | **replicafed/kcm** | 1.04x |",
		"- qps 20 / burst 30: 1.04x (goal 1.0x): met",
		"- client limits off: 0.50x (goal 0.9x): MISSED",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
