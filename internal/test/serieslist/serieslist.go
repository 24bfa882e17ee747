package metrics

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// ReadSeriesList reads a list of metric family names, one a line, with blank
// lines and # comments left out: charts/testdata/series.txt, the series the
// chart's alerts and dashboard read, which the chart, metrics and e2e tests
// check against what is registered and served.
func ReadSeriesList(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the series list: %w", err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the series list %s: %w", path, err)
	}
	return names, nil
}
