package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/replicafed/replicafed/hack/bench/fleet/heapclass"
	"github.com/replicafed/replicafed/hack/bench/fleet/promtext"
)

// Metric names and label filters the benchmark reads.
const (
	mRequests   = "apiserver_request_total"
	mClient     = "rest_client_requests_total"
	mCPU        = "process_cpu_seconds_total"
	mLiveHeap   = "go_gc_heap_live_bytes"
	mRaftIndex  = "replicafed_raft_applied_index"
	mRaftLeader = "replicafed_raft_leader"
	// mRaftEntryKinds and mRaftCommands count what a replica proposed
	// while leading: entries by content, commands by type.
	mRaftEntryKinds = "replicafed_raft_entries_proposed_total"
	mRaftCommands   = "replicafed_raft_commands_proposed_total"
)

var (
	writeVerbs = promtext.In("verb", "POST", "PUT", "PATCH", "DELETE")
	// podWrites are a controller's own pod writes: not the scheduler's
	// bindings, not kwok's status updates.
	podWrites = promtext.All(promtext.In("resource", "pods"), promtext.In("subresource", ""), writeVerbs)
	// rsWrites are the ReplicaSet controller's status updates.
	rsStatusWrites = promtext.All(promtext.In("resource", "replicasets"), promtext.In("subresource", "status"), writeVerbs)
	// coreEventWrites are events.v1 core writes: kube-controller-manager's
	// recorder (the scheduler writes events.k8s.io events).
	coreEventWrites = promtext.All(promtext.In("resource", "events"), promtext.In("group", ""), writeVerbs)
	frsStatusWrites = promtext.All(promtext.In("resource", "federatedreplicasets"), promtext.In("subresource", "status"), writeVerbs)
	clientWrites    = promtext.In("method", "POST", "PUT", "PATCH", "DELETE")
)

// snapshot is every counter the benchmark needs, at one moment.
type snapshot struct {
	members  map[string]promtext.Samples
	hub      promtext.Samples
	replicas map[string]promtext.Samples
	// kcm holds the baseline controller-managers' /proc figures by member.
	kcm map[string]procStats
}

type procStats struct {
	cpu float64 // seconds
	rss float64 // bytes
}

// prober takes snapshots of one fleet.
type prober struct {
	members  map[string]*rest.Config
	hub      *rest.Config
	replicas map[string]string // replica ID -> metrics address
	http     *http.Client
}

func (p *prober) snapshot(ctx context.Context, kcm map[string]int) (snapshot, error) {
	s := snapshot{members: map[string]promtext.Samples{}, replicas: map[string]promtext.Samples{}, kcm: map[string]procStats{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	record := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for name, cfg := range p.members {
		wg.Go(func() {
			got, err := scrapeAPIServer(ctx, cfg)
			if err != nil {
				record(fmt.Errorf("member %s: %w", name, err))
				return
			}
			mu.Lock()
			s.members[name] = got
			mu.Unlock()
		})
	}
	wg.Go(func() {
		got, err := scrapeAPIServer(ctx, p.hub)
		if err != nil {
			record(fmt.Errorf("hub: %w", err))
			return
		}
		mu.Lock()
		s.hub = got
		mu.Unlock()
	})
	for id, addr := range p.replicas {
		wg.Go(func() {
			got, err := p.scrapeReplica(ctx, addr)
			if err != nil {
				record(fmt.Errorf("replica %s: %w", id, err))
				return
			}
			mu.Lock()
			s.replicas[id] = got
			mu.Unlock()
		})
	}
	wg.Wait()
	for member, pid := range kcm {
		st, err := readProc(pid)
		if err != nil {
			errs = append(errs, fmt.Errorf("controller-manager of %s: %w", member, err))
			continue
		}
		s.kcm[member] = st
	}
	if len(errs) > 0 {
		return s, errs[0]
	}
	return s, nil
}

func scrapeAPIServer(ctx context.Context, cfg *rest.Config) (promtext.Samples, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	return promtext.Parse(bytes.NewReader(raw))
}

func (p *prober) scrapeReplica(ctx context.Context, addr string) (promtext.Samples, error) {
	return promtext.Get(ctx, p.http, "http://"+addr+"/metrics")
}

// heapProfiles saves every replica's heap profile, taken after a
// collection so that it holds live objects only, in dir as
// <prefix>-<replica>.heap.pb.gz, the raft leader's as
// <prefix>-<replica>-leader.heap.pb.gz, and returns each replica's in-use
// bytes by heapclass.Replica class.
func (p *prober) heapProfiles(ctx context.Context, dir, prefix string, s snapshot) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	for id, addr := range p.replicas {
		path := filepath.Join(dir, s.profileName(prefix, id)+".heap.pb.gz")
		if err := p.save(ctx, "http://"+addr+"/debug/pprof/heap?gc=1", path, time.Minute); err != nil {
			return nil, fmt.Errorf("saving the heap profile of replica %s: %w", id, err)
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		out[id], err = heapclass.Read(f, heapclass.Replica)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the heap profile of replica %s: %w", id, err)
		}
	}
	return out, nil
}

// cpuProfiles starts every replica's CPU profile of the next d and saves
// each in dir as <prefix>-<replica>.cpu.pb.gz (-leader.cpu.pb.gz for the
// raft leader in s); the returned func waits for them and returns the
// first error.
func (p *prober) cpuProfiles(ctx context.Context, dir, prefix string, s snapshot, d time.Duration) func() error {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	errs := make(chan error, len(p.replicas))
	for id, addr := range p.replicas {
		name := s.profileName(prefix, id)
		go func() {
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs)
			if err := p.save(ctx, url, filepath.Join(dir, name+".cpu.pb.gz"), d+time.Minute); err != nil {
				errs <- fmt.Errorf("saving the CPU profile of replica %s: %w", id, err)
				return
			}
			errs <- nil
		}()
	}
	return func() error {
		var first error
		for range p.replicas {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}

// profileName names replica id's profiles: <prefix>-<id>, with -leader
// added when s saw it lead raft.
func (s snapshot) profileName(prefix, id string) string {
	name := prefix + "-" + id
	if s.replicas[id].Sum(mRaftLeader, nil) == 1 {
		name += "-leader"
	}
	return name
}

// save writes what url answers to path, giving up after timeout.
func (p *prober) save(ctx context.Context, url, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// readProc reads a process's CPU time and resident set from /proc.
func readProc(pid int) (procStats, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStats{}, err
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 22 {
		return procStats{}, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	rssPages, _ := strconv.ParseFloat(fields[21], 64)
	// USER_HZ is 100 on Linux; pages are 4 KiB on the machines this runs on.
	return procStats{cpu: (utime + stime) / 100, rss: rssPages * float64(os.Getpagesize())}, nil
}

// hostOf is the host:port client-go labels a request to cfg with.
func hostOf(cfg *rest.Config) string {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return cfg.Host
	}
	return u.Host
}
