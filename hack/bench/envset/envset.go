// Package envset reads the benchmarks' settings from the environment: each
// variable, when set, must parse and be positive, and a bad one is refused
// naming the variable, so a typo stops a long run before it starts.
package envset

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Getenv returns a variable's value, "" when unset (os.Getenv in commands,
// a map lookup in tests).
type Getenv func(key string) string

// PositiveInts sets each destination from its variable when that is set.
func PositiveInts(getenv Getenv, vars map[string]*int) error {
	return setPositive(getenv, vars, strconv.Atoi, "a positive integer")
}

// PositiveDurations sets each destination from its variable when that is
// set.
func PositiveDurations(getenv Getenv, vars map[string]*time.Duration) error {
	return setPositive(getenv, vars, time.ParseDuration, "a positive duration such as 30m")
}

// setPositive sets each destination, in name order, from its variable when
// that is set and parses to a positive value; want says what is expected.
func setPositive[T int | time.Duration](getenv Getenv, vars map[string]*T, parse func(string) (T, error), want string) error {
	for _, key := range slices.Sorted(maps.Keys(vars)) {
		v := getenv(key)
		if v == "" {
			continue
		}
		x, err := parse(v)
		if err != nil || x <= 0 {
			return fmt.Errorf("%s=%q: want %s", key, v, want)
		}
		*vars[key] = x
	}
	return nil
}

// MaxMembers is how many members a benchmark fleet can have: they are named
// member-a to member-z.
const MaxMembers = 26

// Members refuses a member count the fleet cannot name.
func Members(key string, n int) error {
	if n > MaxMembers {
		return fmt.Errorf("%s=%d: at most %d (members are named member-a to member-z)", key, n, MaxMembers)
	}
	return nil
}
