package expectations_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
)

// lateTransport lets allow pod creates through; once they are used up it
// answers the next stall pod creates at once with a client-side timeout, as a
// member write deadline does, and sends them to the API server only when
// release is closed: the create took effect after its caller gave up.
type lateTransport struct {
	next    http.RoundTripper
	armed   atomic.Bool
	allow   atomic.Int64
	stall   atomic.Int64
	early   atomic.Int64
	release chan struct{}
	wg      sync.WaitGroup

	mu   sync.Mutex
	late []int
}

func (l *lateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	podCreate := req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/pods")
	if !podCreate || !l.armed.Load() || l.allow.Add(-1) >= 0 || l.stall.Add(-1) < 0 {
		return l.next.RoundTrip(req)
	}
	out := req.Clone(context.Background())
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		out.Body = b
	}
	if l.early.Add(-1) >= 0 {
		// Lands at once; only the answer is lost.
		resp, err := l.next.RoundTrip(out)
		if err == nil {
			resp.Body.Close()
		}
		return nil, fmt.Errorf("member write deadline: %w", context.DeadlineExceeded)
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		<-l.release
		resp, err := l.next.RoundTrip(out)
		l.mu.Lock()
		defer l.mu.Unlock()
		if err == nil {
			l.late = append(l.late, resp.StatusCode)
			resp.Body.Close()
		}
	}()
	return nil, fmt.Errorf("member write deadline: %w", context.DeadlineExceeded)
}

// TestLateCreateOfTimedOutNameCollides: a create the client gave up on
// (timeout) lands after the engine's next sync. The name is held and handed
// out again, so the late create collides with the retry and the member never
// runs more pods than its target.
func TestLateCreateOfTimedOutNameCollides(t *testing.T) {
	mc := startMember(t)
	const target = 20
	src, w := workload("late", target)
	c := tu.NewCluster(t, 1, tu.StableTimers)
	c.StartAll()
	n := c.WaitLeader(30 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := n.SetTargets(ctx, fsm.FRSRef{Namespace: "default", Name: "late"}, 1, map[string]int32{"m1": target}); err != nil {
		t.Fatal(err)
	}
	lt := &lateTransport{release: make(chan struct{})}
	lt.allow.Store(7) // slow start: 1, 2, 4 land; the batch of 8 times out
	lt.stall.Store(8)
	lt.early.Store(2)
	lt.armed.Store(true)
	mgr, stop := mc.engage(t, ctx, n, src, func(rt http.RoundTripper) http.RoundTripper { lt.next = rt; return lt })
	t.Cleanup(func() {
		select {
		case <-lt.release:
		default:
			close(lt.release)
		}
		lt.wg.Wait()
		stop()
	})
	mgr.Enqueue(w.Key)

	mc.waitPods(t, ctx, w, 90*time.Second, "")
	close(lt.release)
	lt.wg.Wait()
	lt.mu.Lock()
	late := append([]int(nil), lt.late...)
	lt.mu.Unlock()
	t.Logf("late creates answered %v", late)
	if got := len(mc.pods(t, ctx, w)); got != target {
		t.Fatalf("%d pods after the late creates, want %d (late status codes %v)", got, target, late)
	}
}
