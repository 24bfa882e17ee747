//go:build tools

// Package tools pins actionlint, which checks .github/workflows in `make lint`.
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
