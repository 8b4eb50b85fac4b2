package disruption

import (
	"fmt"
	"strings"
	"time"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Kind is the machine-readable kind of a verdict.
type Kind string

// Verdict kinds. The first group makes a node no candidate at all; the
// second refuses a candidate for one method.
const (
	KindNotManaged        Kind = "NotManaged"
	KindNoNode            Kind = "NoNode"
	KindNotInitialized    Kind = "NotInitialized"
	KindDeleting          Kind = "Deleting"
	KindNominated         Kind = "Nominated"
	KindInQueue           Kind = "InQueue"
	KindNodeDoNotDisrupt  Kind = "NodeDoNotDisrupt"
	KindNoNodePoolLabel   Kind = "NoNodePoolLabel"
	KindNodePoolNotFound  Kind = "NodePoolNotFound"
	KindPodDoNotDisrupt   Kind = "PodDoNotDisrupt"
	KindPDBBlocked        Kind = "PDBBlocked"
	KindMultiplePDBs      Kind = "MultiplePDBs"
	KindInvalidAnnotation Kind = "InvalidDoNotDisruptAnnotation"

	KindBudgetExhausted       Kind = "BudgetExhausted"
	KindConsolidationDisabled Kind = "ConsolidationDisabled"
	KindNotConsolidatable     Kind = "NotConsolidatable"
	KindNotEmpty              Kind = "NotEmpty"
	KindNotDrifted            Kind = "NotDrifted"
	KindReplacementWontFit    Kind = "ReplacementWouldNotFit"
	KindNodeLimit             Kind = "NodeLimitReached"
	KindSimulationFailed      Kind = "SimulationFailed"
	KindDeferred              Kind = "Deferred"
)

// Verdict is one reason a node was not disrupted, as data. Message renders
// it; the fields are what a CLI or a test inspects.
type Verdict struct {
	Kind      Kind
	Node      string
	NodeClaim string
	NodePool  string
	// Method is the disruption reason the verdict belongs to ("" for
	// verdicts that keep the node from being a candidate at all).
	Method v1.DisruptionReason
	// Pod is namespace/name of the blocking pod, Pods of those that would
	// not fit.
	Pod  string
	Pods []string
	// PDB is namespace/name of the blocking PodDisruptionBudget (PDBs for
	// MultiplePDBs).
	PDB  string
	PDBs []string
	// Budget is the budget that allows no more disruptions.
	Budget *BudgetRef
	// Until is when the blocker lapses, when it is known (a do-not-disrupt
	// duration, consolidateAfter).
	Until *time.Time
	// Value is the offending annotation value (InvalidDoNotDisruptAnnotation).
	Value string
	// Detail carries free text from elsewhere (a simulation error).
	Detail string
	// Event says whether the controller publishes the verdict as a
	// DisruptionBlocked event on the Node and NodeClaim (as upstream does
	// for candidate blockers and unschedulable drift replacements).
	Event bool
	// Unconsolidatable says whether the controller publishes the verdict as
	// an Unconsolidatable event on the Node and NodeClaim.
	Unconsolidatable bool
	// Consolidation holds a consolidation verdict's figures.
	Consolidation *ConsolidationDetail
}

// BudgetRef names a budget of a NodePool.
type BudgetRef struct {
	// Index in spec.disruption.budgets; -1 when the pool has no budgets (the
	// API default of 10% applies).
	Index    int
	Nodes    string
	Schedule string
	Duration string
	// Allowed is what the budgets allow for the reason, before nodes
	// already disrupting are subtracted; Disrupting is how many are.
	Allowed, Disrupting int
}

// Message renders the verdict as a sentence.
func (v Verdict) Message() string {
	if msg, ok := consolidationMessage(v); ok {
		return msg
	}
	switch v.Kind {
	case KindNotManaged:
		return "Node isn't managed by karpenter"
	case KindNoNode:
		return "NodeClaim does not have an associated node"
	case KindNotInitialized:
		return "Node isn't initialized"
	case KindDeleting:
		return "Node is deleting or marked for deletion"
	case KindNominated:
		return "Node is nominated for a pending pod"
	case KindInQueue:
		return "Candidate is already being disrupted"
	case KindNodeDoNotDisrupt:
		return fmt.Sprintf("Disruption is blocked through the %q annotation", v1.DoNotDisruptAnnotationKey)
	case KindNoNodePoolLabel:
		return fmt.Sprintf("Node doesn't have required label %q", v1.NodePoolLabelKey)
	case KindNodePoolNotFound:
		return fmt.Sprintf("NodePool %q not found", v.NodePool)
	case KindPodDoNotDisrupt:
		if v.Until != nil {
			return fmt.Sprintf("Pod %q has %q annotation (until %s)", v.Pod, v1.DoNotDisruptAnnotationKey, v.Until.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("Pod %q has %q annotation", v.Pod, v1.DoNotDisruptAnnotationKey)
	case KindPDBBlocked:
		return fmt.Sprintf("Pdb %q prevents pod evictions", v.PDB)
	case KindMultiplePDBs:
		return fmt.Sprintf("Eviction does not support multiple PDBs (pod %q, PodDisruptionBudgets %s)", v.Pod, strings.Join(v.PDBs, ", "))
	case KindInvalidAnnotation:
		return fmt.Sprintf("Pod %q has an invalid %q annotation value %q; it is ignored", v.Pod, v1.DoNotDisruptAnnotationKey, v.Value)
	case KindBudgetExhausted:
		b := v.Budget
		if b == nil {
			return fmt.Sprintf("No allowed disruptions for disruption reason %s due to blocking budget", v.Method)
		}
		msg := fmt.Sprintf("No allowed disruptions for disruption reason %s due to blocking budget (nodes %q", v.Method, b.Nodes)
		if b.Schedule != "" {
			msg += fmt.Sprintf(", schedule %q for %s", b.Schedule, b.Duration)
		}
		return msg + fmt.Sprintf("; allowed %d, already disrupting %d)", b.Allowed, b.Disrupting)
	case KindConsolidationDisabled:
		return fmt.Sprintf("NodePool %q has consolidateAfter Never", v.NodePool)
	case KindNotConsolidatable:
		if v.Until != nil {
			return fmt.Sprintf("Node is not consolidatable until %s (consolidateAfter)", v.Until.UTC().Format(time.RFC3339))
		}
		return "Node is not consolidatable (consolidateAfter has not elapsed)"
	case KindNotEmpty:
		return "Node is not empty"
	case KindNotDrifted:
		return "Node is not drifted"
	case KindReplacementWontFit:
		return fmt.Sprintf("Replacement would not fit pod(s) %s", prettyList(v.Pods, 5))
	case KindNodeLimit:
		return fmt.Sprintf("NodePool %q has no room under limits.nodes for a replacement", v.NodePool)
	case KindDeferred:
		return "Another drifted node is disrupted first"
	case KindSimulationFailed:
		return "Scheduling simulation failed: " + v.Detail
	}
	// Kinds this switch does not know (the repacking planner's, say) carry
	// their sentence in Detail.
	if v.Detail != "" {
		return v.Detail
	}
	return string(v.Kind)
}

// Explanation gathers the verdicts about one node.
type Explanation struct {
	Node, NodeClaim, NodePool string
	Verdicts                  []Verdict
}

// Message joins the verdicts' messages.
func (e Explanation) Message() string {
	parts := make([]string, 0, len(e.Verdicts))
	for _, v := range e.Verdicts {
		parts = append(parts, v.Message())
	}
	return strings.Join(parts, "; ")
}

func prettyList(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d other(s)", strings.Join(items[:max], ", "), len(items)-max)
}
