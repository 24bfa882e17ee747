//go:build tools

// Package tools pins staticcheck.
package tools

import _ "honnef.co/go/tools/cmd/staticcheck"
