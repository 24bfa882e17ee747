// Package fakecluster wraps one controller-runtime client (usually the fake
// client) as a cluster.Cluster, for unit tests of code that reads members
// through their client, API reader or cache.
package fakecluster

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// New returns a cluster whose client, API reader and cache reads are c.
// Every other method panics: the cluster is never started.
func New(c client.Client) cluster.Cluster { return fake{c: c} }

type fake struct {
	cluster.Cluster
	c client.Client
}

func (f fake) GetClient() client.Client    { return f.c }
func (f fake) GetAPIReader() client.Reader { return f.c }
func (f fake) GetCache() cache.Cache       { return fakeCache{c: f.c} }

// fakeCache serves List and Get; informers and indexes are not there.
type fakeCache struct {
	cache.Cache
	c client.Client
}

func (f fakeCache) List(ctx context.Context, l client.ObjectList, o ...client.ListOption) error {
	return f.c.List(ctx, l, o...)
}

func (f fakeCache) Get(ctx context.Context, k client.ObjectKey, obj client.Object, o ...client.GetOption) error {
	return f.c.Get(ctx, k, obj, o...)
}
