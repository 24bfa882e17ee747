//go:build tools

// Package tools pins the Kubernetes binaries of the kind node image: what
// runs on the node (kubelet, kubeadm, kubectl) and what its images hold
// (kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy,
// etcd). etcd comes from the same module graph, so its version is the one
// k8s.io/kubernetes itself requires (kubeadm's default etcd image tag).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
