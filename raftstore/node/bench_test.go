package node_test

import (
	"sort"
	"sync"
	"testing"
	"time"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

func benchApply(b *testing.B, writers int) {
	c := tu.NewCluster(b, 3, func(_ int, cfg *node.NodeConfig) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		cfg.CommitTimeout = 50 * time.Millisecond
	})
	c.StartAll()
	l := c.WaitVoters(3, 20*time.Second)
	ctx := tu.Ctx(b, 10*time.Minute)
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := (b.N + writers - 1) / writers
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per && w*per+i < b.N; i++ {
				t0 := time.Now()
				if _, err := l.Apply(ctx, &fsm.SetHealth{Meta: l.Meta(), Cluster: "m", Healthy: i%2 == 0}); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(len(lat))/el.Seconds(), "applies/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkApply1Writer: sequential Applies on a 3-node loopback cluster
// (raft-boltdb with fsync, all nodes on one disk).
func BenchmarkApply1Writer(b *testing.B) { benchApply(b, 1) }

// BenchmarkApply64Writers: 64 concurrent writers.
func BenchmarkApply64Writers(b *testing.B) { benchApply(b, 64) }

// BenchmarkFailover measures, with default timers (HB=EL=1s, lease 500ms),
// the time from killing the leader to the next leader's first permitted
// member write (Gate open after Barrier).
func BenchmarkFailover(b *testing.B) {
	c := tu.NewCluster(b, 3, func(_ int, cfg *node.NodeConfig) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		cfg.CommitTimeout = 50 * time.Millisecond
	})
	c.StartAll()
	c.WaitVoters(3, 30*time.Second)
	var total, worst time.Duration
	for range b.N {
		l := c.WaitVoters(3, 30*time.Second)
		i := c.Index(l)
		t0 := time.Now()
		c.Kill(i)
		c.WaitLeader(30*time.Second, l)
		d := time.Since(t0)
		total += d
		worst = max(worst, d)
		c.Start(i)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/failover")
	b.ReportMetric(worst.Seconds(), "max-s")
}

// BenchmarkTransferOnShutdown: graceful Shutdown (leadership transfer) to the
// next leader's first permitted write.
func BenchmarkTransferOnShutdown(b *testing.B) {
	c := tu.NewCluster(b, 3, func(_ int, cfg *node.NodeConfig) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	})
	c.StartAll()
	var total time.Duration
	for range b.N {
		l := c.WaitVoters(3, 30*time.Second)
		i := c.Index(l)
		t0 := time.Now()
		_ = l.Shutdown()
		c.WaitLeader(30*time.Second, l)
		total += time.Since(t0)
		c.Kill(i)
		c.Start(i)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/handover")
}
