// Package testcluster starts real Kubernetes control planes from the binaries
// the project builds into bin/ (see hack/tools): etcd and kube-apiserver, and
// optionally kube-scheduler, kube-controller-manager (garbage collector, node
// lifecycle, namespace controllers) and the kwok controller with fake nodes, so
// pods are scheduled and become Ready without a container runtime.
//
// Several clusters can run in one process (a hub and its members). Each listens
// on free loopback ports, authenticates its clients with a static admin token,
// and keeps everything under one temporary directory that Stop removes.
package testcluster
