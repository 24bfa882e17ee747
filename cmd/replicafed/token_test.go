package main

import (
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func tokenOf(t *testing.T, kubeconfig []byte) string {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil || cfg.BearerToken == "" {
		t.Fatalf("kubeconfig without a token: %v", err)
	}
	return cfg.BearerToken
}
