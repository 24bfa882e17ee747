// Package serieslist reads charts/testdata/series.txt, the metric families
// the chart's alerts and dashboard read, for the tests that check it against
// what is registered and served.
package serieslist

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Read reads a list of metric family names, one a line, with blank lines and
// # comments left out.
func Read(path string) ([]string, error) {
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
