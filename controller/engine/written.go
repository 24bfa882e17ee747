package engine

import (
	"sync"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/fedref"
)

// maxSuperseded bounds how many of its own earlier versions an entry
// remembers: writes chained on a cache that lags by more are rare, and the
// fallback (the cached copy, a 409, a live read) is still correct.
const maxSuperseded = 4

// written remembers, per key, the MemberReplicaSet this engine last wrote
// (as the API server returned it) and the resource versions that write
// replaced. A sync that runs before the informer has delivered the write
// would otherwise compare the status with the older cached copy, write the
// same status again on a stale resource version, get a 409, read the object
// live and write a third time. Under many small MemberReplicaSets that was
// 10-15 % of all status writes.
type written struct {
	mu sync.Mutex
	m  map[fedref.MemberObject]writtenCopy
}

type writtenCopy struct {
	obj        *v1alpha1.MemberReplicaSet
	superseded []string
}

// newest returns the copy to sync from: this engine's last write when the
// cache still shows a version that write replaced, else the cached copy. An
// entry ends once the cache shows anything else: the write itself (caught
// up) or another writer's version (which must win).
func (w *written) newest(k fedref.MemberObject, cached *v1alpha1.MemberReplicaSet) *v1alpha1.MemberReplicaSet {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.m[k]
	if !ok {
		return cached
	}
	if c.obj.UID == cached.UID {
		for _, rv := range c.superseded {
			if rv == cached.ResourceVersion {
				return c.obj.DeepCopy()
			}
		}
	}
	delete(w.m, k)
	return cached
}

// record notes that base (the copy the sync started from) was replaced by
// obj, as returned by the API server; replaced lists further versions the
// write is known to supersede (a live copy read for a retry).
func (w *written) record(k fedref.MemberObject, base, obj *v1alpha1.MemberReplicaSet, replaced ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[fedref.MemberObject]writtenCopy{}
	}
	var sup []string
	if prev, ok := w.m[k]; ok && prev.obj.UID == obj.UID && prev.obj.ResourceVersion == base.ResourceVersion {
		// base was itself our write that the cache has not shown yet.
		sup = append(sup, prev.superseded...)
	}
	sup = append(sup, base.ResourceVersion)
	sup = append(sup, replaced...)
	if len(sup) > maxSuperseded {
		sup = sup[len(sup)-maxSuperseded:]
	}
	w.m[k] = writtenCopy{obj: obj.DeepCopy(), superseded: sup}
}

// forget drops key's entry.
func (w *written) forget(k fedref.MemberObject) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, k)
}
