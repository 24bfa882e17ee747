//go:build tools

// Package tools pins coredns.
package tools

import (
	_ "github.com/coredns/coredns"
)
