//go:build tools

// Package testtools pins, in one module, the programs the test clusters run
// beside their control planes: kwok (fake nodes and kubelets),
// metrics-server (metrics.k8s.io from kwok's kubelets) and
// custom-metrics-apiserver's test provider (./custom-metrics). One module
// gives the three one set of dependency versions, so the many Kubernetes
// library packages they share compile once, not three times (#25).
package testtools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/metrics-server/cmd/metrics-server"
)
