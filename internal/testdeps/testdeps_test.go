package testdeps

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestStale(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want string) {
		t.Helper()
		if got, err := stale(dir); err != nil || got != want {
			t.Fatalf("stale = %q, %v; want %q", got, err, want)
		}
	}
	check("is missing")
	hidden := filepath.Join(dir, "node_modules", ".package-lock.json")
	if err := os.MkdirAll(filepath.Dir(hidden), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hidden, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	set := func(f string, at time.Time) {
		if err := os.Chtimes(filepath.Join(dir, f), at, at); err != nil {
			t.Fatal(err)
		}
	}
	set("package.json", now.Add(-time.Hour))
	set("package-lock.json", now.Add(-time.Hour))
	set("node_modules/.package-lock.json", now)
	check("")
	set("package-lock.json", now.Add(time.Minute)) // a pull changed the lock file
	check("is older than package-lock.json")
}
