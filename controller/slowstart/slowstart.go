// Package slowstart runs a number of calls in doubling batches (1, 2, 4, …),
// stopping after the first batch with a failure, so a call that always fails
// (quota, admission) costs a handful of requests instead of hundreds.
package slowstart

import "sync"

// Run calls fn(i) for i in [0, count) in batches of initial, 2·initial, …, each
// batch concurrent and awaited. After a batch with any failure no further batch
// starts. It returns the number of successful calls and the first error seen.
// Indices are handed out in order, so the calls never made are the highest ones.
func Run(count, initial int, fn func(i int) error) (int, error) {
	successes, next := 0, 0
	for size := min(count, initial); size > 0; size = min(2*size, count-next) {
		errs := make(chan error, size)
		var wg sync.WaitGroup
		for i := next; i < next+size; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(i); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		next += size
		successes += size - len(errs)
		if len(errs) > 0 {
			return successes, <-errs
		}
	}
	return successes, nil
}
