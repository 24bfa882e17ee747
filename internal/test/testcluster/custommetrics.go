package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// customMetricsSetup is what Options.CustomMetrics adds to a cluster.
type customMetricsSetup struct {
	// port is the adapter's secure port; writePort takes metric values.
	port, writePort int
}

// startCustomMetrics runs the custom-metrics adapter (custom-metrics-
// apiserver's test provider, bin/custom-metrics) and registers it as
// custom.metrics.k8s.io (v1beta2) and external.metrics.k8s.io (v1beta1).
func (c *Cluster) startCustomMetrics(ctx context.Context) error {
	s := &customMetricsSetup{}
	var err error
	if s.port, err = FreePort(); err != nil {
		return err
	}
	if s.writePort, err = FreePort(); err != nil {
		return err
	}
	c.customMetrics = s
	if err := c.startComponent("custom-metrics",
		"--lister-kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(s.port),
		"--cert-dir="+filepath.Join(c.Dir, "custom-metrics"),
		"--write-address="+hostPort(s.writePort),
	); err != nil {
		return err
	}
	return c.registerAPIServices(ctx, "custom-metrics", s.port,
		schema.GroupVersion{Group: "custom.metrics.k8s.io", Version: "v1beta2"},
		schema.GroupVersion{Group: "external.metrics.k8s.io", Version: "v1beta1"})
}

// SetCustomMetric sets the value the cluster's custom.metrics.k8s.io
// reports for metric of the named object of resource (for example "pods")
// in namespace, through the adapter's write endpoint. It needs
// Options.CustomMetrics.
func (c *Cluster) SetCustomMetric(ctx context.Context, namespace, resourceName, name, metric string, value resource.Quantity) error {
	if c.customMetrics == nil {
		return fmt.Errorf("cluster %s runs no custom metrics adapter (Options.CustomMetrics)", c.Name)
	}
	body, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", value.String(), err)
	}
	u := fmt.Sprintf("http://%s/write-metrics/namespaces/%s/%s/%s/%s", hostPort(c.customMetrics.writePort),
		url.PathEscape(namespace), url.PathEscape(resourceName), url.PathEscape(name), url.PathEscape(metric))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building the request to set %s: %w", metric, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("setting %s of %s/%s: %w", metric, resourceName, name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("setting %s of %s/%s: %s: %s", metric, resourceName, name, resp.Status, msg)
	}
	return nil
}
