package history_test

import (
	"strings"

	"github.com/google/go-cmp/cmp/cmpopts"
)

// sortStrings compares string lists as sets: the API server lists by name.
var sortStrings = cmpopts.SortSlices(func(a, b string) bool { return strings.Compare(a, b) < 0 })
