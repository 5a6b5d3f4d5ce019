package clusterproc

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddrBelowEphemeral: FreeAddr's ports are free and below the
// kernel's ephemeral range, where no outgoing connection takes them
// while a process restarts.
func TestFreeAddrBelowEphemeral(t *testing.T) {
	low := ephemeralLow()
	if low <= stablePorts {
		t.Fatalf("the ephemeral range starts at %d, below %d: FreeAddr cannot keep out of it here", low, stablePorts)
	}
	for range 20 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if port < stablePorts || port >= low {
			t.Fatalf("FreeAddr gave %s, outside [%d, %d)", addr, stablePorts, low)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr's %s is not free: %v", addr, err)
		}
		ln.Close()
	}
}
