package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/podstate"
)

// Environment variables of TestTenantIsolation.
const (
	// tenantSeedEnv reproduces a run: the test prints the seed it used.
	tenantSeedEnv = "REPLICAFED_TENANT_SEED"
	// tenantIterationsEnv overrides the number of generated changes.
	tenantIterationsEnv = "REPLICAFED_TENANT_ITERATIONS"
)

// defaultTenantIterations keeps the test to about two minutes in make test;
// each iteration is one generated change plus one scale of the healthy FRS.
const defaultTenantIterations = 16

// TestTenantIsolation applies generated spec changes (valid, borderline and
// invalid values of every field and type) to one tenant's FederatedReplicaSet
// while another tenant's keeps working. After every change:
//   - the healthy FederatedReplicaSet converges to a new replica count;
//   - if the change was refused by the API server, or accepted and then
//     reported Invalid by replicafed, not one running replica of the victim
//     was deleted;
//   - every replicafed replica is still running.
//
// The seed is printed; REPLICAFED_TENANT_SEED reruns the same changes.
func TestTenantIsolation(t *testing.T) {
	e := newEnv(t, "e2e-tenant")
	seed, iterations := tenantSettings(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reproduce with %s=%d %s=%d go test ./e2e -run TestTenantIsolation", tenantSeedEnv, seed, tenantIterationsEnv, iterations)
		}
	})
	logf(t, "seed %d, %d iterations", seed, iterations)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))

	weights := []v1alpha1.ClusterPreference{pref(memberA, 1, -1), pref(memberB, 1, -1), pref(memberC, 1, -1)}
	e.create(frsSpec{name: "healthy", replicas: 3, clusters: weights})
	victim := e.create(frsSpec{name: "victim", replicas: 6, clusters: weights})
	baseline := victim.Spec.DeepCopy()
	e.waitSplit("healthy", split{memberA: 1, memberB: 1, memberC: 1})
	e.waitSplit("victim", split{memberA: 2, memberB: 2, memberC: 2})

	healthy := 3
	for i := range iterations {
		m := generateMutation(rng, allMembers)
		running := e.victimPods()
		outcome := e.applyMutation("victim", m)
		logf(t, "iteration %d: %s -> %s", i, m.desc, outcome)

		// The other tenant's workload keeps moving: a new count each time.
		healthy = 3 + (healthy+3)%9
		e.scale("healthy", int32(healthy))
		third := healthy / 3
		e.waitSplit("healthy", split{memberA: third, memberB: third, memberC: third})

		if outcome != outcomeValid {
			if gone := missing(running, e.victimPods()); len(gone) > 0 {
				t.Fatalf("iteration %d (%s, %s) deleted running replicas of the victim: %s", i, m.desc, outcome, strings.Join(gone, ", "))
			}
		}
		for _, r := range e.f.Replicas {
			if !r.Running() {
				t.Fatalf("iteration %d (%s): replica %s is no longer running; log tail:\n%s", i, m.desc, r.ID, r.LogTail(4000))
			}
		}
		if outcome != outcomeRefused {
			e.restoreSpec("victim", baseline)
			e.waitSplit("victim", split{memberA: 2, memberB: 2, memberC: 2})
		}
	}
}

// tenantSettings reads the seed and the iteration count from the environment.
func tenantSettings(t *testing.T) (seed uint64, iterations int) {
	t.Helper()
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv(tenantSeedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", tenantSeedEnv, s, err)
		}
		seed = n
	}
	iterations = defaultTenantIterations
	if s := os.Getenv(tenantIterationsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", tenantIterationsEnv, s)
		}
		iterations = n
	}
	return seed, iterations
}

// conditionInvalid is the condition replicafed sets on a FederatedReplicaSet
// whose spec it cannot interpret.
const conditionInvalid = "Invalid"

// mutationOutcome is what the hub made of a generated change.
type mutationOutcome string

const (
	// outcomeRefused: the API server refused the patch.
	outcomeRefused mutationOutcome = "refused"
	// outcomeInvalid: accepted, then reported Invalid by replicafed.
	outcomeInvalid mutationOutcome = "invalid"
	// outcomeValid: accepted and planned; replicas may move.
	outcomeValid mutationOutcome = "valid"
)

// applyMutation patches the FederatedReplicaSet with the generated merge
// patch and, when the API server accepts it, waits until replicafed has
// observed the new generation, as valid or as Invalid.
func (e *env) applyMutation(name string, m specMutation) mutationOutcome {
	e.t.Helper()
	ctx := context.Background()
	u := victimObject(e.ns, name)
	err := e.f.HubClient.Patch(ctx, u, client.RawPatch(types.MergePatchType, m.patch))
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return outcomeRefused
	case err != nil:
		e.t.Fatalf("patching %s with %s: unexpected error %v", name, m.patch, err)
	}
	gen := u.GetGeneration()
	var outcome mutationOutcome
	e.poll(fmt.Sprintf("replicafed to observe generation %d of %s (%s)", gen, name, m.desc), func(ctx context.Context) (bool, error) {
		if err := e.f.HubClient.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return false, nil
		}
		if invalidFor(u, gen) {
			outcome = outcomeInvalid
			return true, nil
		}
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		if observed >= gen {
			outcome = outcomeValid
			return true, nil
		}
		return false, nil
	})
	return outcome
}

// victimObject is the FederatedReplicaSet as unstructured, so reading it
// never depends on the typed decoding of whatever the patch put there.
func victimObject(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("FederatedReplicaSet"))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// invalidFor reports whether the object carries condition Invalid=True for
// generation gen.
func invalidFor(u *unstructured.Unstructured, gen int64) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if !ok || cm["type"] != conditionInvalid || cm["status"] != "True" {
			continue
		}
		og, _, _ := unstructured.NestedInt64(cm, "observedGeneration")
		return og >= gen
	}
	return false
}

// restoreSpec puts the baseline spec back, whatever the generated change
// left in it.
func (e *env) restoreSpec(name string, spec *v1alpha1.FederatedReplicaSetSpec) {
	e.t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := victimObject(e.ns, name)
		if err := e.f.HubClient.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return err
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec)
		if err != nil {
			return fmt.Errorf("converting the baseline spec: %w", err)
		}
		u.Object["spec"] = obj
		return e.f.HubClient.Update(ctx, u)
	})
	if err != nil {
		e.t.Fatalf("restoring the spec of %s: %v", name, err)
	}
}

// victimPods is the set of active pods of the victim in every member, by
// member/name/uid.
func (e *env) victimPods() map[string]bool {
	e.t.Helper()
	out := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, m := range allMembers {
		var pods []corev1.Pod
		err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var err error
			pods, err = e.pods(ctx, m, "victim")
			return err == nil, nil
		})
		if err != nil {
			e.t.Fatalf("listing victim pods in %s: %v", m, err)
		}
		for i := range pods {
			if podstate.IsActive(&pods[i]) {
				out[m+"/"+pods[i].Name+"/"+string(pods[i].UID)] = true
			}
		}
	}
	return out
}

// missing lists the keys of before that are not in after.
func missing(before, after map[string]bool) []string {
	var out []string
	for k := range before {
		if !after[k] {
			out = append(out, k)
		}
	}
	return out
}
