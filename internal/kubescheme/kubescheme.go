// Package kubescheme builds the one runtime.Scheme every replicafed client
// uses, hub and member alike: the built-in Kubernetes types plus
// replicafed.io/v1alpha1.
package kubescheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// New returns a scheme with the Kubernetes built-in types and replicafed's.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	return s, nil
}

// Must is New for tests and package initialisation; it panics on error,
// which only a programming error (a conflicting type registration) causes.
func Must() *runtime.Scheme {
	s, err := New()
	if err != nil {
		panic(err)
	}
	return s
}
