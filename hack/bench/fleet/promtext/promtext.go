// Package promtext reads Prometheus text exposition (an API server's or a
// replica's /metrics) into flat samples and sums the ones a benchmark asks
// for. Parse and Sum are pure; Get fetches a page over HTTP.
package promtext

import (
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one counter or gauge value with its labels. Histograms and
// summaries contribute their _count and _sum.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples is one scrape.
type Samples []Sample

// Parse reads the text format.
func Parse(r io.Reader) (Samples, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	var out Samples
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			labels := make(map[string]string, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch fam.GetType() {
			case dto.MetricType_COUNTER:
				out = append(out, Sample{Name: name, Labels: labels, Value: m.GetCounter().GetValue()})
			case dto.MetricType_GAUGE:
				out = append(out, Sample{Name: name, Labels: labels, Value: m.GetGauge().GetValue()})
			case dto.MetricType_UNTYPED:
				out = append(out, Sample{Name: name, Labels: labels, Value: m.GetUntyped().GetValue()})
			case dto.MetricType_HISTOGRAM:
				out = append(out,
					Sample{Name: name + "_count", Labels: labels, Value: float64(m.GetHistogram().GetSampleCount())},
					Sample{Name: name + "_sum", Labels: labels, Value: m.GetHistogram().GetSampleSum()})
			case dto.MetricType_SUMMARY:
				out = append(out,
					Sample{Name: name + "_count", Labels: labels, Value: float64(m.GetSummary().GetSampleCount())},
					Sample{Name: name + "_sum", Labels: labels, Value: m.GetSummary().GetSampleSum()})
			}
		}
	}
	return out, nil
}

// Match selects samples by label; a nil Match takes every sample.
type Match func(labels map[string]string) bool

// Sum adds the values of the samples called name that match.
func (s Samples) Sum(name string, match Match) float64 {
	var total float64
	for _, x := range s {
		if x.Name == name && (match == nil || match(x.Labels)) {
			total += x.Value
		}
	}
	return total
}

// In matches when label has one of values.
func In(label string, values ...string) Match {
	return func(l map[string]string) bool {
		for _, v := range values {
			if l[label] == v {
				return true
			}
		}
		return false
	}
}

// All matches when every m matches.
func All(ms ...Match) Match {
	return func(l map[string]string) bool {
		for _, m := range ms {
			if !m(l) {
				return false
			}
		}
		return true
	}
}
