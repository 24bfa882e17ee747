package health

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// ProbeFunc checks one member once.
type ProbeFunc func(ctx context.Context) error

// ReadyzProbe returns a probe that GETs /readyz with the member's credentials.
func ReadyzProbe(cfg *rest.Config) (ProbeFunc, error) {
	c := rest.CopyConfig(cfg)
	// Probes must not queue behind the member's workers in a shared limiter.
	c.RateLimiter = nil
	c.QPS, c.Burst = -1, 0
	rc, err := rest.UnversionedRESTClientFor(withDefaults(c))
	if err != nil {
		return nil, fmt.Errorf("building /readyz client: %w", err)
	}
	return func(ctx context.Context) error {
		_, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}, nil
}

// Options configure a Monitor.
type Options struct {
	Interval   time.Duration
	Timeout    time.Duration
	Thresholds Thresholds
	Clock      clock.WithTicker
	// OnChange is called, outside the monitor's lock, whenever a member's
	// Health changes.
	OnChange func(cluster string, st State)
}

// Monitor probes registered members and keeps their State.
type Monitor struct {
	opts   Options
	mu     sync.RWMutex
	states map[string]State
	stops  map[string]context.CancelFunc
}

// NewMonitor returns a Monitor; call Watch for each member.
func NewMonitor(opts Options) *Monitor {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Monitor{opts: opts, states: map[string]State{}, stops: map[string]context.CancelFunc{}}
}

// Watch probes cluster until ctx ends or Forget is called. It returns at once.
func (m *Monitor) Watch(ctx context.Context, cluster string, probe ProbeFunc) {
	ctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	if stop, ok := m.stops[cluster]; ok {
		stop()
	}
	m.stops[cluster] = cancel
	m.mu.Unlock()
	log := logr.FromContextOrDiscard(ctx).WithValues("cluster", cluster)
	go func() {
		t := m.opts.Clock.NewTicker(m.opts.Interval)
		defer t.Stop()
		for {
			m.probeOnce(ctx, log, cluster, probe)
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
		}
	}()
}

func (m *Monitor) probeOnce(ctx context.Context, log logr.Logger, cluster string, probe ProbeFunc) {
	pctx, cancel := context.WithTimeout(ctx, m.opts.Timeout)
	err := probe(pctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	now := m.opts.Clock.Now()
	m.mu.Lock()
	if _, watched := m.stops[cluster]; !watched {
		m.mu.Unlock()
		return
	}
	before := m.states[cluster]
	after := before.Observe(err, now, m.opts.Thresholds)
	m.states[cluster] = after
	onChange := m.opts.OnChange
	m.mu.Unlock()
	if after.Health != before.Health {
		log.V(1).Info("Member health changed", "from", before.Health, "to", after.Health, "probeError", after.LastError)
		if onChange != nil {
			onChange(cluster, after)
		}
	} else if err != nil {
		log.V(2).Info("Member probe failed", "probeError", err.Error())
	}
}

// SetOnChange replaces the health-change callback; call it before Watch.
func (m *Monitor) SetOnChange(fn func(cluster string, st State)) {
	m.mu.Lock()
	m.opts.OnChange = fn
	m.mu.Unlock()
}

// Forget stops probing cluster and drops its state.
func (m *Monitor) Forget(cluster string) {
	m.mu.Lock()
	if stop, ok := m.stops[cluster]; ok {
		stop()
	}
	delete(m.stops, cluster)
	delete(m.states, cluster)
	m.mu.Unlock()
}

// State returns a member's state; ok is false for an unknown member.
func (m *Monitor) State(cluster string) (State, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.states[cluster]
	return s, ok
}

// Clusters lists watched members, sorted.
func (m *Monitor) Clusters() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, 0, len(m.stops))
	for c := range m.stops {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}
