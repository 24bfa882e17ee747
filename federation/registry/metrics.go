package registry

import (
	"github.com/prometheus/client_golang/prometheus"
)

var expiryDesc = prometheus.NewDesc("replicafed_member_credentials_expiry_seconds",
	"Seconds until a member's inline token or client certificate expires (negative once expired), by cluster. "+
		"Absent for members whose credentials do not say (opaque tokens, files, plugins) and for members that are gone.",
	[]string{"cluster"}, nil)

// ExpiryCollector exports each member's seconds of credentials left,
// computed at every scrape from Registry.Expiries, so a member's series goes
// when the member does.
type ExpiryCollector struct {
	Registry *Registry
}

var _ prometheus.Collector = ExpiryCollector{}

// Describe sends the one metric's description.
func (c ExpiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

// Collect sends one series per member with a known expiry.
func (c ExpiryCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.Registry.opts.Clock.Now()
	for name, exp := range c.Registry.Expiries() {
		ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, exp.At.Sub(now).Seconds(), name)
	}
}
