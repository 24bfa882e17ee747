package promtext

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Get reads one /metrics page over HTTP (a replica's plain-HTTP metrics, as
// the benchmarks configure them) within ten seconds and parses it.
func Get(ctx context.Context, c *http.Client, url string) (Samples, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("reading %s: %s: %s", url, resp.Status, b)
	}
	return Parse(resp.Body)
}
