//go:build tools

// Package tools pins metrics-server, which the test clusters run against
// kwok's fake kubelets so that members serve a real metrics.k8s.io.
package tools

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
