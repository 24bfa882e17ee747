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
// binds it. Linux routes all of 127.0.0.0/8 to the loopback interface; where
// only 127.0.0.1 is configured (macOS), Host is 127.0.0.1.
var Host = pickHost()

func pickHost() string {
	h := fmt.Sprintf("127.%d.%d.1", 1+rand.IntN(254), rand.IntN(256))
	l, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
	if err != nil {
		return "127.0.0.1"
	}
	_ = l.Close()
	return h
}

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

// Port returns a port that is free on host and that this process has not
// handed out before (for any host): a port released by a stopped server
// must still be its own when the server restarts.
func Port(host string) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	var last error
	for range 200 {
		p := portMin + rand.IntN(portMax-portMin)
		if issued[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			last = err
			continue
		}
		_ = l.Close()
		issued[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port on %s between %d and %d: %w", host, portMin, portMax, last)
}

// FreePort returns Host:port with a Port free on Host.
func FreePort() (string, error) {
	p, err := Port(Host)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(Host, strconv.Itoa(p)), nil
}
