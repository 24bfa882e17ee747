package config

import "time"

// Autoscaling configures the FederatedHorizontalPodAutoscaler controller
// (docs/autoscaling.md). Its keys mirror kube-controller-manager's
// --horizontal-pod-autoscaler-* flags.
type Autoscaling struct {
	// Enabled runs the controller; off by default.
	Enabled bool `mapstructure:"enabled"`
	// SyncPeriod is how often each autoscaler is computed.
	SyncPeriod time.Duration `mapstructure:"syncPeriod"`
	// Tolerance is the relative change of a metric below which nothing
	// scales (0 <= tolerance < 1).
	Tolerance float32 `mapstructure:"tolerance"`
	// DownscaleStabilization is the scale-down window of autoscalers whose
	// spec sets none.
	DownscaleStabilization time.Duration `mapstructure:"downscaleStabilization"`
	// CPUInitializationPeriod: within it after a pod starts, its CPU sample
	// counts only when ready for a full metric window.
	CPUInitializationPeriod time.Duration `mapstructure:"cpuInitializationPeriod"`
	// InitialReadinessDelay: a pod unready within it after starting is taken
	// as never ready.
	InitialReadinessDelay time.Duration `mapstructure:"initialReadinessDelay"`
	// MemberTimeout bounds the reads of a member's metrics APIs
	// (metrics.k8s.io, custom and external metrics) and autoscalers; a
	// member that does not answer in time is missing.
	MemberTimeout time.Duration `mapstructure:"memberTimeout"`
}

func init() {
	settings = append(settings,
		setting{key: "autoscaling.enabled", def: false, usage: "run the FederatedHorizontalPodAutoscaler controller on the raft leader"},
		setting{key: "autoscaling.syncPeriod", def: 15 * time.Second, usage: "how often each FederatedHorizontalPodAutoscaler is computed (>= 1s)"},
		setting{key: "autoscaling.tolerance", def: float32(0.1), usage: "relative metric change below which nothing scales (0 to <1)"},
		setting{key: "autoscaling.downscaleStabilization", def: 5 * time.Minute, usage: "scale-down stabilisation window when an autoscaler sets none"},
		setting{key: "autoscaling.cpuInitializationPeriod", def: 5 * time.Minute, usage: "after a pod starts, CPU samples count only once it was ready a full metric window"},
		setting{key: "autoscaling.initialReadinessDelay", def: 30 * time.Second, usage: "a pod unready this soon after starting counts as never ready"},
		setting{key: "autoscaling.memberTimeout", def: 5 * time.Second, usage: "deadline of each read of a member's metrics and autoscalers (< syncPeriod)"},
	)
}

func (c *Config) validateAutoscaling(p *problems) {
	a := c.Autoscaling
	p.atLeast("autoscaling.syncPeriod", a.SyncPeriod, time.Second)
	if a.Tolerance < 0 || a.Tolerance >= 1 {
		p.add("autoscaling.tolerance", "must be at least 0 and below 1, got %v", a.Tolerance)
	}
	if a.DownscaleStabilization < 0 || a.DownscaleStabilization > time.Hour {
		p.add("autoscaling.downscaleStabilization", "must be between 0s and 1h, got %q", a.DownscaleStabilization.String())
	}
	if a.CPUInitializationPeriod < 0 {
		p.add("autoscaling.cpuInitializationPeriod", "must not be negative, got %q", a.CPUInitializationPeriod.String())
	}
	if a.InitialReadinessDelay < 0 {
		p.add("autoscaling.initialReadinessDelay", "must not be negative, got %q", a.InitialReadinessDelay.String())
	}
	if p.positive("autoscaling.memberTimeout", a.MemberTimeout) && a.SyncPeriod > 0 && a.MemberTimeout >= a.SyncPeriod {
		p.add("autoscaling.memberTimeout", "must be below autoscaling.syncPeriod (%s), got %q", a.SyncPeriod, a.MemberTimeout.String())
	}
}
