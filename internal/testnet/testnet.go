// Package testnet gives a test process a loopback address of its own, so a
// test that must choose a port before a server binds it does not lose the
// port in between: to another test binary running beside it, to an outgoing
// connection's source port, or to another test of the same binary.
package testnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Host is this process's own loopback address, 127.a.b.1 with a and b
// random. Other processes listen and connect on 127.0.0.1 (or their own
// random address), so a port free on Host stays free until this process
// binds it. Linux routes all of 127.0.0.0/8 to the loopback interface.
var Host = fmt.Sprintf("127.%d.%d.1", 1+rand.IntN(254), rand.IntN(256))

// Ports below the kernel's ephemeral range (32768 and up on Linux), so no
// connection of this process takes one as its source port either.
const (
	portMin = 20000
	portMax = 32000
)

var (
	mu     sync.Mutex
	issued = map[int]bool{}
)

// FreePort returns Host:port with a port that is free on Host and that this
// process has not handed out before: a port released by a stopped server
// must still be its own when the server restarts.
func FreePort() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	var last error
	for range 200 {
		p := portMin + rand.IntN(portMax-portMin)
		if issued[p] {
			continue
		}
		addr := net.JoinHostPort(Host, strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			last = err
			continue
		}
		_ = l.Close()
		issued[p] = true
		return addr, nil
	}
	return "", fmt.Errorf("no free port on %s between %d and %d: %w", Host, portMin, portMax, last)
}
