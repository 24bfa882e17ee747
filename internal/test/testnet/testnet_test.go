package testnet

import (
	"net"
	"runtime"
	"strconv"
	"testing"
)

func TestHostIsLoopback(t *testing.T) {
	ip := net.ParseIP(Host)
	if ip == nil || !ip.IsLoopback() {
		t.Fatalf("Host = %q, want a loopback address", Host)
	}
	if runtime.GOOS == "linux" && Host == "127.0.0.1" {
		t.Fatalf("Host = %q, want an address of this process's own on Linux", Host)
	}
}

func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		addr, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if host != Host {
			t.Fatalf("FreePort() = %s, want host %s", addr, Host)
		}
		if p, _ := strconv.Atoi(port); p < portMin || p >= portMax {
			t.Fatalf("FreePort() = %s, want a port in [%d, %d)", addr, portMin, portMax)
		}
		if seen[addr] {
			t.Fatalf("FreePort() returned %s twice", addr)
		}
		seen[addr] = true
		// Bindable: the point of the address.
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("binding %s: %v", addr, err)
		}
		_ = l.Close()
	}
}
