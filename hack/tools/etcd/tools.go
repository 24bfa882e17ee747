//go:build tools

// Package tools pins etcd.
package tools

import _ "go.etcd.io/etcd/server/v3"
