package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// UpdateStrategyType says what a change of spec.template does to the pods
// already running.
// +kubebuilder:validation:Enum=ReplicaSet;Rolling
type UpdateStrategyType string

const (
	// UpdateReplicaSet is a ReplicaSet's behaviour and the default: a new
	// template reaches new pods only; running pods keep the template they
	// were created from until something else removes them.
	UpdateReplicaSet UpdateStrategyType = "ReplicaSet"
	// UpdateRolling replaces the pods of the old template with pods of the
	// new one across the fleet, stage by stage, within spec.moveBudget.
	UpdateRolling UpdateStrategyType = "Rolling"
)

// FailurePolicy says what a rolling update does when a stage fails its
// health gate or makes no progress within progressDeadlineSeconds.
// +kubebuilder:validation:Enum=Pause;Rollback;Continue
type FailurePolicy string

const (
	// FailurePause stops the rollout where it is (condition RolloutPaused,
	// reason PausedOnFailure) until the template changes or it is resumed.
	FailurePause FailurePolicy = "Pause"
	// FailureRollback returns every member to the last revision that
	// completed a rollout, within the same budget (condition RolledBack).
	FailureRollback FailurePolicy = "Rollback"
	// FailureContinue reports the failure (condition Progressing False) and
	// goes on to the next stage.
	FailureContinue FailurePolicy = "Continue"
)

// PromotionPolicy says how a rollout leaves a stage once it has baked.
// +kubebuilder:validation:Enum=Auto;Manual
type PromotionPolicy string

const (
	// PromotionAuto goes on to the next stage as soon as the stage has baked.
	PromotionAuto PromotionPolicy = "Auto"
	// PromotionManual waits, once the stage has baked, until the
	// FederatedReplicaSet carries the annotation AnnotationPromote naming
	// the stage (condition RolloutPaused, reason AwaitingPromotion).
	PromotionManual PromotionPolicy = "Manual"
)

// AnnotationPromote on a FederatedReplicaSet promotes the stage its value
// names when that stage waits for a manual promotion:
// `kubectl annotate frs web replicafed.io/promote=canary`. The value names
// the stage so that a late or repeated command cannot promote a later stage.
const AnnotationPromote = "replicafed.io/promote"

// LabelTemplateHash is put on every pod and MemberReplicaSet of a rolling
// FederatedReplicaSet: the hash part of its revision, as Deployments label
// their pods with pod-template-hash.
const LabelTemplateHash = "replicafed.io/template-hash"

// Bounds of the update strategy's fields.
const (
	// DefaultRevisionHistoryLimit is how many old revisions are kept for
	// undo when revisionHistoryLimit is unset.
	DefaultRevisionHistoryLimit = 10
	// MaxRevisionHistoryLimit bounds revisionHistoryLimit.
	MaxRevisionHistoryLimit = 1000
	// DefaultProgressDeadlineSeconds is progressDeadlineSeconds when unset,
	// as for a Deployment.
	DefaultProgressDeadlineSeconds = 600
	// MaxProgressDeadlineSeconds bounds progressDeadlineSeconds (30 days).
	MaxProgressDeadlineSeconds = 30 * 24 * 3600
	// MaxStages bounds updateStrategy.stages.
	MaxStages = 16
)

// UpdateStrategy says how a new pod template replaces the running pods.
//
// Without it (or with type ReplicaSet) a FederatedReplicaSet behaves as a
// ReplicaSet does: a template change reaches new pods only and the pods
// already running keep their template. The other fields apply to type
// Rolling only.
//
// A Rolling update gives each template a revision (a hash of the template,
// on label LabelTemplateHash) and runs, in every member, one
// MemberReplicaSet per revision that still has pods. It goes through the
// stages in order; members that no stage selects, and members a canary
// stage only started, are updated in full after the last stage. At every
// step the whole fleet stays within spec.moveBudget: at most replicas +
// maxSurge pods and at least replicas - maxUnavailable Available pods, and
// in a member the old revision loses Available pods only as the new
// revision's replacements there become Available, or, ahead of them, within
// maxUnavailable. spec.moveBudget is the rollout's budget too, rather than a
// second one here: the fleet has one pod count and one availability, and a
// failover or a move back during a rollout must stay within the same bound
// as the rollout, which two budgets would not say how to share.
// Availability is spec.minReadySeconds, as for the members' pods.
// +kubebuilder:validation:XValidation:rule="self.type == 'Rolling' || !has(self.stages) || size(self.stages) == 0",message="stages need type Rolling",fieldPath=".stages"
// +kubebuilder:validation:XValidation:rule="self.type == 'Rolling' || !has(self.paused) || !self.paused",message="paused needs type Rolling",fieldPath=".paused"
type UpdateStrategy struct {
	// Type is ReplicaSet (the default: running pods keep their template) or
	// Rolling (running pods are replaced, stage by stage).
	// +kubebuilder:default=ReplicaSet
	// +optional
	Type UpdateStrategyType `json:"type,omitempty"`

	// Stages order the rollout over the members. A stage names its members
	// (clusters, clusterSelector or both; neither means every member) and
	// may stop at a canary. Each stage's members keep what earlier stages
	// gave them. Without stages the rollout updates every member at once,
	// within the budget, like a Deployment's rolling update.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(s, s.name == self[size(self) - 1].name || (has(s.clusters) && size(s.clusters) > 0) || has(s.clusterSelector))",message="only the last stage may leave out clusters and clusterSelector (a stage without them selects every member)"
	// +optional
	Stages []RolloutStage `json:"stages,omitempty"`

	// OnFailure says what happens when a stage fails its health gate or
	// makes no progress for progressDeadlineSeconds: Pause (the default),
	// Rollback to the last revision that completed a rollout, or Continue
	// with the next stage.
	// +kubebuilder:default=Pause
	// +optional
	OnFailure FailurePolicy `json:"onFailure,omitempty"`

	// ProgressDeadlineSeconds is how long a stage may go without progress
	// (no more Available pods of the new revision) before it fails, as for
	// a Deployment. Waiting for a manual promotion and a paused rollout do
	// not count. It must exceed spec.minReadySeconds.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2592000
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// RevisionHistoryLimit is how many old revisions are kept for undo.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// Paused stops the rollout where it is: no member's split between
	// revisions changes (scaling and failover still do) and the progress
	// deadline does not run.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// RolloutStage is one step of a rolling update: a set of members, how much
// of them to update, how long to watch them and how to go on.
// +kubebuilder:validation:XValidation:rule="!has(self.canary) || (has(self.clusters) && size(self.clusters) > 0) || has(self.clusterSelector)",message="canary needs clusters or clusterSelector: a canary is a part of named members",fieldPath=".canary"
type RolloutStage struct {
	// Name of the stage, unique in the list; AnnotationPromote names it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Clusters names the stage's members.
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Clusters []string `json:"clusters,omitempty"`

	// ClusterSelector selects the stage's members by their labels, in
	// addition to clusters; it is written as a label selector is.
	// +optional
	ClusterSelector *ClusterLabelSelector `json:"clusterSelector,omitempty"`

	// Canary limits the stage to part of its members' replicas: a number of
	// pods, or a percentage of the members' targets (rounded up), split
	// among the members in proportion to their targets. Unset updates the
	// members in full.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 && self <= 1000000 : self.matches('^([1-9]|[1-9][0-9]|100)%$')",message="must be a number of pods from 1 to 1000000 or a percentage from 1% to 100%"
	// +optional
	Canary *intstr.IntOrString `json:"canary,omitempty"`

	// BakeTime is how long the stage's new pods must all have been
	// Available, with the health gate holding, before the stage completes.
	// +optional
	BakeTime *Duration `json:"bakeTime,omitempty"`

	// Promotion is Auto (the default: go on once baked) or Manual (wait for
	// the annotation AnnotationPromote naming this stage).
	// +kubebuilder:default=Auto
	// +optional
	Promotion PromotionPolicy `json:"promotion,omitempty"`
}

// ClusterLabelSelector selects member clusters by label. It is written as a
// metav1.LabelSelector is (LabelSelector converts it); its own type carries
// the bounds that let the API server check a list of them within its CEL
// cost budget.
type ClusterLabelSelector struct {
	// MatchLabels are key=value pairs a member's labels must all have.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// MatchExpressions are requirements a member's labels must all meet.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +optional
	MatchExpressions []ClusterSelectorRequirement `json:"matchExpressions,omitempty"`
}

// ClusterSelectorRequirement is one requirement of a ClusterLabelSelector,
// as metav1.LabelSelectorRequirement.
// +kubebuilder:validation:XValidation:rule="self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : (!has(self.values) || size(self.values) == 0)",message="operators In and NotIn need values; Exists and DoesNotExist take none"
type ClusterSelectorRequirement struct {
	// Key is the label key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Key string `json:"key"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// Values for In and NotIn.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	Values []string `json:"values,omitempty"`
}

// LabelSelector returns the selector as a metav1.LabelSelector.
func (s *ClusterLabelSelector) LabelSelector() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: e.Key, Operator: e.Operator, Values: e.Values})
	}
	return out
}

// RolloutPhase is where a rolling update stands.
// +kubebuilder:validation:Enum=Progressing;Baking;AwaitingPromotion;Paused;Failed;RollingBack;RolledBack;Complete
type RolloutPhase string

const (
	// PhaseProgressing: the current stage's members are being updated.
	PhaseProgressing RolloutPhase = "Progressing"
	// PhaseBaking: the stage's new pods are Available; its bake time runs.
	PhaseBaking RolloutPhase = "Baking"
	// PhaseAwaitingPromotion: the stage has baked and waits for AnnotationPromote.
	PhaseAwaitingPromotion RolloutPhase = "AwaitingPromotion"
	// PhasePaused: updateStrategy.paused is set.
	PhasePaused RolloutPhase = "Paused"
	// PhaseFailed: a stage failed and onFailure is Pause.
	PhaseFailed RolloutPhase = "Failed"
	// PhaseRollingBack: every member returns to the stable revision.
	PhaseRollingBack RolloutPhase = "RollingBack"
	// PhaseRolledBack: the fleet is back on the stable revision; the failed
	// template stays in spec until it is changed.
	PhaseRolledBack RolloutPhase = "RolledBack"
	// PhaseComplete: every member runs the update revision only.
	PhaseComplete RolloutPhase = "Complete"
)

// Condition types and reasons of a rolling update. ConditionProgressing
// carries the Progressing reasons, as a Deployment's does.
const (
	// ConditionRolloutPaused is True while the rollout waits: paused, awaiting
	// a promotion, or stopped on a failure.
	ConditionRolloutPaused = "RolloutPaused"
	// ConditionRolledBack is True once a rollout was undone and the fleet runs
	// the stable revision again.
	ConditionRolledBack = "RolledBack"

	// ReasonNewRevisionCreated (Progressing True): a template change started
	// a rollout.
	ReasonNewRevisionCreated = "NewRevisionCreated"
	// ReasonRevisionUpdating (Progressing True): a stage's members are being
	// updated.
	ReasonRevisionUpdating = "RevisionUpdating"
	// ReasonStageBaking (Progressing True): a stage's new pods are Available
	// and its bake time runs.
	ReasonStageBaking = "StageBaking"
	// ReasonNewRevisionAvailable (Progressing True): the rollout completed.
	ReasonNewRevisionAvailable = "NewRevisionAvailable"
	// ReasonProgressDeadlineExceeded (Progressing False): a stage made no
	// progress for progressDeadlineSeconds.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonHealthGateFailed (Progressing False): the new revision's pods
	// failed the health gate.
	ReasonHealthGateFailed = "HealthGateFailed"
	// ReasonRollingBack (Progressing True): members return to the stable
	// revision.
	ReasonRollingBack = "RollingBack"

	// ReasonPausedByUser (RolloutPaused True): updateStrategy.paused is set.
	ReasonPausedByUser = "PausedByUser"
	// ReasonAwaitingPromotion (RolloutPaused True): a Manual stage has baked.
	ReasonAwaitingPromotion = "AwaitingPromotion"
	// ReasonPausedOnFailure (RolloutPaused True): a stage failed with
	// onFailure Pause.
	ReasonPausedOnFailure = "PausedOnFailure"

	// ReasonAutomaticRollback (RolledBack True): onFailure Rollback undid
	// the rollout.
	ReasonAutomaticRollback = "AutomaticRollback"
	// ReasonTemplateReverted (RolledBack True): spec.template went back to
	// the stable revision during a rollout.
	ReasonTemplateReverted = "TemplateReverted"
)

// RevisionStatus is one live revision (one with pods or targets) of a
// rolling FederatedReplicaSet, summed over members.
type RevisionStatus struct {
	// Name of the revision: the FederatedReplicaSet's name, a dash and the
	// template hash (the value of LabelTemplateHash).
	Name string `json:"name"`
	// Revision is the revision's number, counting up from 1 with each new
	// template, as `kubectl rollout history` numbers them.
	Revision int64 `json:"revision"`
	// Target is the sum of the members' targets for this revision.
	Target int32 `json:"target"`
	// Replicas is the number of active pods of this revision.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas is the number of ready pods of this revision.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// AvailableReplicas is the number of available pods of this revision.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
}

// ClusterRevisionStatus is one revision's counts in one member.
type ClusterRevisionStatus struct {
	// Name of the revision (see RevisionStatus.Name).
	Name string `json:"name"`
	// Target is the member's target for this revision.
	Target int32 `json:"target"`
	// Replicas is the number of active pods of this revision in the member.
	Replicas int32 `json:"replicas"`
	// AvailableReplicas is the number of available pods of this revision in
	// the member.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
}

// RolloutStatus is where the current (or last) rolling update stands.
type RolloutStatus struct {
	// Phase of the rollout.
	Phase RolloutPhase `json:"phase"`
	// StageIndex is the current stage's position in updateStrategy.stages;
	// the length of the list for the implicit last stage that updates every
	// member in full.
	// +optional
	StageIndex int32 `json:"stageIndex"`
	// StageName is the current stage's name; "(all)" for the implicit last stage.
	// +optional
	StageName string `json:"stageName,omitempty"`
	// StageStartTime is when the current stage started.
	// +optional
	StageStartTime *metav1.Time `json:"stageStartTime,omitempty"`
	// BakeStartTime is when the current stage's new pods were all Available.
	// +optional
	BakeStartTime *metav1.Time `json:"bakeStartTime,omitempty"`
	// LastProgressTime is when the rollout last made progress; the progress
	// deadline counts from it.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
	// FailedRevision is the revision a rollback left; the same template
	// does not start a rollout again.
	// +optional
	FailedRevision string `json:"failedRevision,omitempty"`
	// Message says why the rollout is where it is.
	// +optional
	Message string `json:"message,omitempty"`
}
