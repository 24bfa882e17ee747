//go:build tools

// Package tools pins kind.
package tools

import (
	_ "sigs.k8s.io/kind"
)
