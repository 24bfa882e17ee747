// Command custom-metrics runs custom-metrics-apiserver's test provider (the
// one its test-adapter serves): a real custom.metrics.k8s.io and
// external.metrics.k8s.io API server whose object metrics a test sets by
// POSTing quantities to /write-metrics/... on --write-address. It differs
// from upstream's test-adapter only in that address, which upstream fixes
// at :8080 and which several test clusters on one host must not share.
package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/emicklei/go-restful/v3"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"
	fakeprov "sigs.k8s.io/custom-metrics-apiserver/test-adapter/provider"
)

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()
	adapter := &basecmd.AdapterBase{Name: "custom-metrics"}
	writeAddr := adapter.Flags().String("write-address", "127.0.0.1:8080", "where the endpoint that sets metric values listens")
	logs.AddFlags(adapter.Flags())
	if err := adapter.Flags().Parse(os.Args); err != nil {
		klog.Fatalf("Parsing flags: %v", err)
	}
	dyn, err := adapter.DynamicClient()
	if err != nil {
		klog.Fatalf("Building the dynamic client: %v", err)
	}
	mapper, err := adapter.RESTMapper()
	if err != nil {
		klog.Fatalf("Building the REST mapper: %v", err)
	}
	prov, ws := fakeprov.NewFakeProvider(dyn, mapper)
	adapter.WithCustomMetrics(prov)
	adapter.WithExternalMetrics(prov)

	// The write endpoint gets a container of its own, not the process-wide
	// default one.
	c := restful.NewContainer()
	c.Add(ws)
	srv := &http.Server{Addr: *writeAddr, Handler: c, ReadHeaderTimeout: 3 * time.Second}
	go func() { klog.Fatal(srv.ListenAndServe()) }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := adapter.Run(ctx); err != nil {
		klog.Fatalf("Running the adapter: %v", err)
	}
}
