package aggregate

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Bounds on what reaches a FederatedReplicaSet's status. Members' messages
// are text written by other programs (a member API server's error, an
// admission webhook's denial) and can be of any length; a status the API
// server refuses (422) would freeze that object's status for good, so every
// message and list is cut to fit before it is written. Lengths are in bytes,
// which never exceed the character counts the schema checks.
const (
	// MaxMessage bounds one member's text: a row's message, and a
	// member's text after its name in a condition message.
	MaxMessage = 1024
	// MaxConditionMessage is the longest condition message
	// metav1.Condition's schema accepts.
	MaxConditionMessage = 32768
	// MaxClusters bounds status.clusters (the CRD's maxItems). Over it,
	// members with a target or with pods are kept first, then the rest in
	// name order.
	MaxClusters = 512
	// TruncatedMarker ends every message that was cut.
	TruncatedMarker = "...[truncated]"
)

// Truncate returns s when it is at most max bytes long; otherwise its
// longest prefix that, followed by TruncatedMarker, fits in max bytes, cut
// at a character boundary.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	keep := max - len(TruncatedMarker)
	if keep <= 0 {
		return TruncatedMarker[:max]
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + TruncatedMarker
}

// joinBounded joins parts with sep into at most max bytes: whole parts while
// they fit, then "+N more" for those left out.
func joinBounded(prefix string, parts []string, sep string, max int) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i, p := range parts {
		more := fmt.Sprintf("%s+%d more", sep, len(parts)-i)
		need := len(p)
		if i > 0 {
			need += len(sep)
		}
		// Room is kept for the "+N more" that would follow this part if
		// it were not the last.
		reserve := 0
		if i < len(parts)-1 {
			reserve = len(more)
		}
		if b.Len()+need+reserve > max {
			if i == 0 {
				more = fmt.Sprintf("+%d more", len(parts))
			}
			if b.Len()+len(more) <= max {
				b.WriteString(more)
			}
			return Truncate(b.String(), max)
		}
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(p)
	}
	return Truncate(b.String(), max)
}

// clamp32 converts a sum to int32, saturating instead of wrapping.
func clamp32(v int64) int32 {
	switch {
	case v > math.MaxInt32:
		return math.MaxInt32
	case v < math.MinInt32:
		return math.MinInt32
	}
	return int32(v)
}

// boundRows keeps at most MaxClusters rows, in name order.
func boundRows(rows []v1alpha1.ClusterStatus) []v1alpha1.ClusterStatus {
	if len(rows) <= MaxClusters {
		return rows
	}
	busy := func(r *v1alpha1.ClusterStatus) bool { return r.Target > 0 || r.Replicas > 0 }
	sort.SliceStable(rows, func(i, j int) bool {
		bi, bj := busy(&rows[i]), busy(&rows[j])
		if bi != bj {
			return bi
		}
		return rows[i].Name < rows[j].Name
	})
	rows = rows[:MaxClusters:MaxClusters]
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows
}
