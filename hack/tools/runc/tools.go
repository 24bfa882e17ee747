//go:build tools

// Package tools pins runc.
package tools

import (
	_ "github.com/opencontainers/runc"
)
