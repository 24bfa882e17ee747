package node

import (
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicafed/replicafed/raftstore/fsm"
)

// enc queues one encoded command header per type.
func enc(ts ...fsm.Type) []*pendingApply {
	out := make([]*pendingApply, 0, len(ts))
	for _, ty := range ts {
		out = append(out, &pendingApply{data: []byte{byte(ty), fsm.Version1}})
	}
	return out
}

// onTick marks ps as sent in a round on a shared tick (OnTick).
func onTick(ps []*pendingApply) []*pendingApply {
	for _, p := range ps {
		p.onTick = true
	}
	return ps
}

func TestEntryContent(t *testing.T) {
	tests := []struct {
		name  string
		batch []*pendingApply
		want  string
	}{
		{"one command", enc(fsm.TypeSetTargets), "set-targets"},
		{"one type, many commands", enc(fsm.TypeReserve, fsm.TypeReserve), "batch:reserve"},
		{"types sorted, each once", enc(fsm.TypeSettle, fsm.TypeReserve, fsm.TypeSettle, fsm.TypeReserve), "batch:reserve+settle"},
		{"targets and reservations", enc(fsm.TypeSetTargets, fsm.TypeReserve), "batch:reserve+set-targets"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, entryContent(tc.batch)); diff != "" {
				t.Errorf("entryContent (-want +got):\n%s", diff)
			}
		})
	}
}

// Only a queue of background work (renewals, usages, observations) is held
// for company; anything a member write waits on goes at once.
func TestOnlyBackground(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue []*pendingApply
		want  bool
	}{
		{"empty", nil, false},
		{"a renewal", enc(fsm.TypeRenewOwnership), true},
		{"a renewal and its usages", enc(fsm.TypeRenewOwnership, fsm.TypeSetMemberUsage, fsm.TypeSetMemberUsage), true},
		{"a flush", enc(fsm.TypeSettle), true},
		{"a reservation", enc(fsm.TypeReserve), false},
		{"a flush behind a reservation", enc(fsm.TypeReserve, fsm.TypeSettle), false},
		{"targets after a renewal", enc(fsm.TypeRenewOwnership, fsm.TypeSetTargets), false},
		{"a release", enc(fsm.TypeReleaseOwnership), false},
		{"a round on a tick", onTick(enc(fsm.TypeReserve, fsm.TypeSettle)), true},
		{"a round on a tick and a reservation", append(onTick(enc(fsm.TypeReserve)), enc(fsm.TypeReserve)...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := onlyBackground(tc.queue); got != tc.want {
				t.Errorf("onlyBackground = %v, want %v", got, tc.want)
			}
		})
	}
}

// A command others wait on ends the committer's linger over background
// work at once; more background work does not.
func TestLingerWakesForForegroundWork(t *testing.T) {
	defer func(d time.Duration) { backgroundLinger = d }(backgroundLinger)
	backgroundLinger = time.Hour
	n := &Node{stopCh: make(chan struct{})}
	a := &n.applier
	a.running = true // enqueue must not start a committer here
	enc := func(ty fsm.Type) *pendingApply { return &pendingApply{data: []byte{byte(ty), fsm.Version1}} }
	a.mu.Lock()
	a.queue = []*pendingApply{enc(fsm.TypeRenewOwnership)}
	done := make(chan struct{})
	go func() {
		n.linger(a) // releases a.mu
		close(done)
	}()
	lingering := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.lingering
	}
	for deadline := time.Now().Add(time.Minute); !lingering(); {
		if time.Now().After(deadline) {
			t.Fatal("the committer never lingered")
		}
		runtime.Gosched()
	}
	n.enqueue(enc(fsm.TypeSettle), enc(fsm.TypeSetMemberUsage))
	select {
	case <-done:
		t.Fatal("background work ended the linger")
	default:
	}
	n.enqueue(enc(fsm.TypeReserve))
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a reservation did not end the linger")
	}
	if got := len(a.queue); got != 4 {
		t.Fatalf("%d commands queued, want 4", got)
	}
}
