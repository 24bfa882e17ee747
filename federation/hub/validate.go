package hub

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/aggregate"
	"github.com/replicafed/replicafed/federation/planner"
)

// ConditionInvalid is True while a FederatedReplicaSet's spec cannot be
// interpreted (reason: the first problem's kind; message: every problem with
// its field path, bounded). Nothing is planned for it meanwhile: its members
// keep their last committed targets, nothing is deleted on its account, and
// other objects are not affected. It is removed once the spec is valid.
const ConditionInvalid = "Invalid"

// Reasons of ConditionInvalid found here; the planner's own are
// planner.Reason*.
const (
	ReasonNameTooLong      = "NameTooLong"
	ReasonInvalidName      = "InvalidName"
	ReasonInvalidSelector  = "InvalidSelector"
	ReasonSelectorMismatch = "SelectorMismatch"
	// ReasonInvalidSpec: any other field the schema refuses.
	ReasonInvalidSpec = "InvalidSpec"
)

// Condition, event and note texts are bounded so that one object's input
// can never make its status patch fail (a condition message allows 32 KiB).
const (
	maxConditionMessage = 1024
	maxEventMessage     = 1024
)

// specProblems returns why frs cannot be interpreted, nil when it can: the
// problems of workloadProblems, then every rule of the CRD schema the object
// breaks (FederatedReplicaSet.Validate: it may have been stored under an
// older schema; planner.Check holds the same rules for the fields Plan
// reads), each field reported once.
func specProblems(frs *v1alpha1.FederatedReplicaSet) []planner.Problem {
	out := workloadProblems(frs)
	seen := map[string]bool{}
	for _, p := range out {
		seen[p.Field] = true
	}
	for _, e := range frs.Validate() {
		if !seen[e.Field] {
			seen[e.Field] = true
			out = append(out, planner.Problem{Field: e.Field, Reason: reasonFor(e.Field), Message: e.ErrorBody()})
		}
	}
	return out
}

// rejectSpec is the first phase of a pass over a spec that cannot be
// interpreted (s.problems): nothing is planned or committed for it, so the
// members keep their last committed targets and nothing is deleted on its
// account; the Invalid condition and a warning say why.
func (r *Reconciler) rejectSpec(ctx context.Context, s *scope) (bool, error) {
	cond := invalidCondition(s.problems, s.frs.Generation)
	ctrl.LoggerFrom(ctx).V(1).Info("Spec cannot be interpreted; targets kept", "frs", klog.KObj(s.frs), "reason", cond.Reason, "problems", cond.Message)
	// No plan waits for facts meanwhile.
	r.awaiting.Delete(s.key)
	s.outcome = &outcome{
		planErr: &aggregate.PlanFailure{Reason: "InvalidSpec", Message: "the spec cannot be interpreted (condition Invalid says why)"},
		invalid: &cond,
	}
	return true, nil
}

// reasonFor names the kind of problem at a schema field path: the
// workload's own fields here, the fields Plan reads as the planner names
// them (planner.ReasonFor), ReasonInvalidSpec for any other.
func reasonFor(path string) string {
	for _, r := range []struct{ prefix, reason string }{
		{"metadata.name", ReasonInvalidName},
		{"spec.selector", ReasonInvalidSelector},
		{"spec.template", ReasonSelectorMismatch},
	} {
		if strings.HasPrefix(path, r.prefix) {
			return r.reason
		}
	}
	if reason, ok := planner.ReasonFor(path); ok {
		return reason
	}
	return ReasonInvalidSpec
}

// workloadProblems are the problems that concern what members would run:
// a name that cannot be the value of the label every MemberReplicaSet
// carries (v1alpha1.LabelFederatedName), a pod selector that does not parse
// or is empty, a template its selector does not match. A member must not act
// on such an object at all (Workloads hands it off).
func workloadProblems(frs *v1alpha1.FederatedReplicaSet) []planner.Problem {
	var out []planner.Problem
	if errs := validation.IsValidLabelValue(frs.Name); len(errs) > 0 {
		reason := ReasonInvalidName
		if len(frs.Name) > validation.LabelValueMaxLength {
			reason = ReasonNameTooLong
		}
		out = append(out, planner.Problem{Field: "metadata.name", Reason: reason,
			Message: fmt.Sprintf("%d characters cannot be the value of label %s on the members' objects: %s",
				len(frs.Name), v1alpha1.LabelFederatedName, errs[0])})
	}
	sel, err := metav1.LabelSelectorAsSelector(frs.Spec.Selector)
	switch {
	case err != nil:
		out = append(out, planner.Problem{Field: "spec.selector", Reason: ReasonInvalidSelector, Message: err.Error()})
	case sel.Empty():
		out = append(out, planner.Problem{Field: "spec.selector", Reason: ReasonInvalidSelector, Message: "must not be empty (it would match every pod)"})
	case !sel.Matches(labels.Set(frs.Spec.Template.Labels)):
		out = append(out, planner.Problem{Field: "spec.template.metadata.labels", Reason: ReasonSelectorMismatch,
			Message: fmt.Sprintf("do not match spec.selector %q", sel.String())})
	}
	return out
}

// invalidCondition is the Invalid condition for problems.
func invalidCondition(problems []planner.Problem, generation int64) metav1.Condition {
	parts := make([]string, len(problems))
	for i, p := range problems {
		parts[i] = p.String()
	}
	return metav1.Condition{
		Type: ConditionInvalid, Status: metav1.ConditionTrue, Reason: problems[0].Reason,
		Message:            boundedJoin(parts, "; ", maxConditionMessage),
		ObservedGeneration: generation,
	}
}

// boundedJoin joins parts with sep into at most limit bytes: the parts
// that fit whole, then "(+N more)"; a first part too long is cut at a rune
// boundary.
func boundedJoin(parts []string, sep string, limit int) string {
	if all := strings.Join(parts, sep); len(all) <= limit {
		return all
	}
	var b strings.Builder
	for i, p := range parts {
		more := ""
		if rest := len(parts) - i - 1; rest > 0 {
			more = fmt.Sprintf("%s(+%d more)", sep, rest)
		}
		add := p
		if i > 0 {
			add = sep + p
		}
		if b.Len()+len(add)+len(more) <= limit {
			b.WriteString(add)
			continue
		}
		if i == 0 {
			return truncate(p, limit-len(more)) + more
		}
		return b.String() + sep + fmt.Sprintf("(+%d more)", len(parts)-i)
	}
	return b.String()
}

// truncate cuts s to at most n bytes at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	n = max(n-len(mark), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}
