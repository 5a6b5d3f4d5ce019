package loadgen

import (
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

func TestParseProcStatus(t *testing.T) {
	m, err := parseProcStatus([]byte("Name:\tmemoria\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nRssAnon:\t 768 kB\nRssFile:\t 256 kB\nRssShmem:\t 0 kB\n"))
	if err != nil || m != (ProcMemory{RSS: 1 << 20, Peak: 2 << 20, Anon: 768 << 10, File: 256 << 10}) {
		t.Fatalf("%+v, %v", m, err)
	}
	if _, err := parseProcStatus([]byte("VmRSS:\t1024 kB\n")); err == nil {
		t.Fatal("a status without VmHWM, RssAnon, RssFile was accepted")
	}
	if _, err := parseProcStatus([]byte("VmRSS:\t1024 pages\nVmHWM:\t1 kB\nRssAnon:\t1 kB\nRssFile:\t1 kB\n")); err == nil {
		t.Fatal("a status in other units was accepted")
	}
	self, err := ReadProcMemory(os.Getpid())
	if err != nil || self.RSS <= 0 || self.Peak < self.RSS {
		t.Fatalf("this process: %+v, %v", self, err)
	}
}

func TestMix(t *testing.T) {
	m, err := ParseMix("insert=3, get=1")
	if err != nil || m[OpInsert] != 3 || m[OpGet] != 1 || m.String() != "insert=3,get=1" {
		t.Fatalf("%v, %v", m, err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	n := map[Op]int{}
	for range 4000 {
		n[m.pick(rng)]++
	}
	if n[OpRecall] != 0 || n[OpInsert] < 2800 || n[OpInsert] > 3200 {
		t.Fatalf("drawn %v for 3:1", n)
	}
	if d, err := ParseMix(DefaultMix().String()); err != nil || len(d) != len(Ops) {
		t.Fatalf("default mix does not round-trip: %v, %v", d, err)
	}
	for _, bad := range []string{"", "insert", "insert=x", "delete=1", "insert=-1", "insert=0,get=0"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("mix %q accepted", bad)
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if Percentile(d, 0.5) != 50 || Percentile(d, 0.99) != 99 || Percentile(d, 1) != 100 || Percentile(d[:1], 0.99) != 1 {
		t.Fatalf("p50 %d p99 %d p100 %d", Percentile(d, 0.5), Percentile(d, 0.99), Percentile(d, 1))
	}
}
