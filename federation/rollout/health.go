package rollout

import "fmt"

// PodHealth is what the members report of one revision's active pods,
// summed over members.
type PodHealth struct {
	// Pods is the number of active pods.
	Pods int32
	// Restarts is the sum of their containers' restart counts.
	Restarts int32
	// CrashLooping is the number of pods with a container waiting in
	// CrashLoopBackOff.
	CrashLooping int32
}

// MaxExtraRestartsPerPod is how many more restarts per pod, on average,
// the update revision may show than the stable one before the gate fails.
// The new pods are younger than the old ones, so they have had less time
// to restart: more restarts per pod than the old ones plus one is a
// regression, not noise.
const MaxExtraRestartsPerPod = 1

// Gate judges the update revision's pods against the stable revision's:
// it fails when more of the new pods crash-loop (as a share of the pods)
// than of the old ones, or when the new pods restart more than
// MaxExtraRestartsPerPod times per pod beyond the old ones. With no new pod
// yet it passes: readiness (Step's Settled) decides then. The message says
// what failed, with the figures.
func Gate(update, stable PodHealth) (Verdict, string) {
	if update.Pods <= 0 {
		return HealthPassed, ""
	}
	// Shares compared without division: a/b > c/d  <=>  a*d > c*b.
	if update.CrashLooping > 0 && (stable.Pods <= 0 ||
		int64(update.CrashLooping)*int64(stable.Pods) > int64(stable.CrashLooping)*int64(update.Pods)) {
		return HealthFailed, fmt.Sprintf("%d of %d new pods are in CrashLoopBackOff (old revision: %d of %d)",
			update.CrashLooping, update.Pods, stable.CrashLooping, stable.Pods)
	}
	// update.Restarts/update.Pods > stable.Restarts/stable.Pods + extra.
	var over bool
	if stable.Pods <= 0 {
		over = int64(update.Restarts) > int64(MaxExtraRestartsPerPod)*int64(update.Pods)
	} else {
		over = int64(update.Restarts)*int64(stable.Pods) >
			(int64(stable.Restarts)+int64(MaxExtraRestartsPerPod)*int64(stable.Pods))*int64(update.Pods)
	}
	if over {
		return HealthFailed, fmt.Sprintf("new pods restarted %d times over %d pods (old revision: %d over %d; at most %d more per pod)",
			update.Restarts, update.Pods, stable.Restarts, stable.Pods, MaxExtraRestartsPerPod)
	}
	return HealthPassed, ""
}
