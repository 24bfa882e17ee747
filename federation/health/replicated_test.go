package health

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

type rec struct {
	healthy bool
	since   time.Time
}

type memRecord struct {
	m     map[string]rec
	fails int // SetMemberHealth calls still to fail
	sets  int
}

func (r *memRecord) MemberHealth(c string) (bool, time.Time, bool) {
	v, ok := r.m[c]
	return v.healthy, v.since, ok
}

func (r *memRecord) SetMemberHealth(_ context.Context, c string, healthy bool, since time.Time) error {
	r.sets++
	if r.fails > 0 {
		r.fails--
		return errors.New("leadership lost")
	}
	r.m[c] = rec{healthy, since}
	return nil
}

type memLocal map[string]State

func (l memLocal) State(c string) (State, bool) { s, ok := l[c]; return s, ok }
func (l memLocal) Clusters() []string {
	var out []string
	for c := range l {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func TestReplicatedState(t *testing.T) {
	unreachable := func(since, lastOK int) State {
		s := State{Health: v1alpha1.ClusterUnreachable, Since: at(since)}
		if lastOK >= 0 {
			s.LastSuccess = at(lastOK)
		}
		return s
	}
	tests := []struct {
		name      string
		local     *State
		record    *rec
		wantOK    bool
		want      v1alpha1.ClusterHealth
		wantSince time.Time
	}{
		{"nothing known", nil, nil, false, "", time.Time{}},
		{"no local verdict: the record (healthy)", &State{Health: v1alpha1.ClusterHealthUnknown, Since: at(50)}, &rec{true, at(10)}, true, v1alpha1.ClusterHealthy, at(10)},
		{"not probed here yet: the record (unreachable)", nil, &rec{false, at(10)}, true, v1alpha1.ClusterUnreachable, at(10)},
		{"local healthy wins over a stale unreachable record", &State{Health: v1alpha1.ClusterHealthy, Since: at(40)}, &rec{false, at(10)}, true, v1alpha1.ClusterHealthy, at(40)},
		{"same outage: the recorded earlier start", ptr(unreachable(30, 5)), &rec{false, at(10)}, true, v1alpha1.ClusterUnreachable, at(10)},
		{"a success seen after the recorded start: local start", ptr(unreachable(30, 20)), &rec{false, at(10)}, true, v1alpha1.ClusterUnreachable, at(30)},
		{"record healthy: local start", ptr(unreachable(30, 5)), &rec{true, at(1)}, true, v1alpha1.ClusterUnreachable, at(30)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := memLocal{}
			if tc.local != nil {
				l["a"] = *tc.local
			}
			r := &memRecord{m: map[string]rec{}}
			if tc.record != nil {
				r.m["a"] = *tc.record
			}
			got, ok := (&Replicated{Local: l, Record: r}).State("a")
			if ok != tc.wantOK || got.Health != tc.want || !got.Since.Equal(tc.wantSince) {
				t.Fatalf("State = %s since %v ok %v, want %s since %v ok %v", got.Health, got.Since, ok, tc.want, tc.wantSince, tc.wantOK)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestDesired(t *testing.T) {
	tests := []struct {
		name      string
		st        State
		record    *rec
		write     bool
		wantOK    bool
		wantSince time.Time
	}{
		{"unknown writes nothing", State{Health: v1alpha1.ClusterHealthUnknown}, nil, false, false, time.Time{}},
		{"healthy, no record", State{Health: v1alpha1.ClusterHealthy, Since: at(5)}, nil, true, true, at(5)},
		{"healthy, recorded healthy", State{Health: v1alpha1.ClusterHealthy, Since: at(5)}, &rec{true, at(1)}, false, true, at(1)},
		{"healthy, recorded unreachable: recovery", State{Health: v1alpha1.ClusterHealthy, Since: at(50)}, &rec{false, at(1)}, true, true, at(50)},
		{"unreachable, recorded healthy", State{Health: v1alpha1.ClusterUnreachable, Since: at(50), LastSuccess: at(45)}, &rec{true, at(1)}, true, false, at(50)},
		{"unreachable, same outage recorded earlier", State{Health: v1alpha1.ClusterUnreachable, Since: at(50), LastSuccess: at(5)}, &rec{false, at(10)}, false, false, at(10)},
		{"unreachable, stale record of an earlier outage", State{Health: v1alpha1.ClusterUnreachable, Since: at(50), LastSuccess: at(45)}, &rec{false, at(10)}, true, false, at(50)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h bool
			var s time.Time
			if tc.record != nil {
				h, s = tc.record.healthy, tc.record.since
			}
			wh, ws, write := Desired(tc.st, h, s, tc.record != nil)
			if write != tc.write || (write || tc.record != nil) && (wh != tc.wantOK || !ws.Equal(tc.wantSince)) {
				t.Fatalf("Desired = %v %v write %v, want %v %v write %v", wh, ws, write, tc.wantOK, tc.wantSince, tc.write)
			}
		})
	}
}

// A transition whose write fails is written again on the next pass, and a
// later outage is recorded with its own start, never the stale one.
func TestRecorderRetriesUntilRecorded(t *testing.T) {
	local := memLocal{"a": {Health: v1alpha1.ClusterHealthy, Since: at(100), LastSuccess: at(100)}}
	record := &memRecord{m: map[string]rec{"a": {false, at(10)}}, fails: 2}
	leading := true
	var recorded []string
	r := NewRecorder(local, record, func() bool { return leading }, time.Second)
	r.OnRecorded = func(c string) { recorded = append(recorded, c) }
	ctx := context.Background()
	if failed := r.Pass(ctx); failed != 1 {
		t.Fatalf("first pass: %d failed, want 1", failed)
	}
	if failed := r.Pass(ctx); failed != 1 {
		t.Fatalf("second pass: %d failed, want 1", failed)
	}
	if failed := r.Pass(ctx); failed != 0 {
		t.Fatalf("third pass: %d failed, want 0", failed)
	}
	if got := record.m["a"]; !got.healthy || !got.since.Equal(at(100)) || len(recorded) != 1 {
		t.Fatalf("record = %+v, callbacks %v", got, recorded)
	}
	if r.Pass(ctx); record.sets != 3 {
		t.Fatalf("a recorded state was written again: %d writes", record.sets)
	}
	// A follower writes nothing.
	leading = false
	local["a"] = State{Health: v1alpha1.ClusterUnreachable, Since: at(200), LastSuccess: at(190)}
	if r.Pass(ctx); record.sets != 3 {
		t.Fatalf("follower wrote the record")
	}
	leading = true
	r.Pass(ctx)
	if got := record.m["a"]; got.healthy || !got.since.Equal(at(200)) {
		t.Fatalf("new outage recorded as %+v, want unreachable since %v", got, at(200))
	}
	rep := &Replicated{Local: local, Record: record}
	if st, _ := rep.State("a"); !st.Since.Equal(at(200)) {
		t.Fatalf("planning sees unreachable since %v, want %v", st.Since, at(200))
	}
}
