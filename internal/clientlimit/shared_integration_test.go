package clientlimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/internal/clientlimit"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// counting counts the waits on the bucket it wraps.
type counting struct {
	flowcontrol.RateLimiter
	waits atomic.Int64
}

func (c *counting) Wait(ctx context.Context) error {
	c.waits.Add(1)
	return c.RateLimiter.Wait(ctx)
}

// TestSharedAcrossResourceTypes: a controller-runtime client's writes of
// three resource types, and a clientset's event, all wait on the one
// bucket Shared put in the configuration (without it each REST client
// would make its own, and none of these would wait on it).
func TestSharedAcrossResourceTypes(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Name: "clientlimit"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	rc := rest.CopyConfig(c.Config)
	clientlimit.Shared(rc, 1000, 1000)
	bucket := &counting{RateLimiter: rc.RateLimiter}
	rc.RateLimiter = bucket
	cl, err := client.New(rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(rc))
	if err != nil {
		t.Fatal(err)
	}
	meta := metav1.ObjectMeta{Namespace: "default", Name: "shared-bucket"}
	writes := []struct {
		what  string
		write func() error
	}{
		{"ConfigMap create", func() error { return cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: meta}) }},
		{"Secret create", func() error { return cl.Create(ctx, &corev1.Secret{ObjectMeta: meta}) }},
		{"ServiceAccount create", func() error { return cl.Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}) }},
		{"clientset Event create", func() error {
			_, err := cs.EventsV1().Events("default").Create(ctx, &eventsv1.Event{ObjectMeta: meta,
				EventTime: metav1.NewMicroTime(time.Unix(1796000000, 0)), ReportingController: "replicafed.io/test",
				ReportingInstance: "test", Action: "Test", Reason: "Test", Type: corev1.EventTypeNormal,
				Regarding: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "default", Name: meta.Name}}, metav1.CreateOptions{})
			return err
		}},
	}
	for _, w := range writes {
		before := bucket.waits.Load()
		if err := w.write(); err != nil {
			t.Fatalf("%s: %v", w.what, err)
		}
		if after := bucket.waits.Load(); after == before {
			t.Errorf("%s did not wait on the shared bucket", w.what)
		}
	}
}
