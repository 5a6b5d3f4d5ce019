package base

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestKeyIndexIsAMap: long random sequences of puts (new keys and new
// numbers for old ones), adds (a number only for a new key), deletions and reads against a Go map, from a
// table of 8 slots grown on the way, with many keys sharing home slots
// and, in small tables, probe runs past the table's end.
func TestKeyIndexIsAMap(t *testing.T) {
	for _, universe := range []int{6, 20, 200, 5_000} {
		t.Run(fmt.Sprint(universe), func(t *testing.T) { keyIndexIsAMap(t, universe) })
	}
}

func keyIndexIsAMap(t *testing.T, universe int) {
	rng := rand.New(rand.NewPCG(1, uint64(universe)))
	var keys []string // the owner's: the key of each number
	x := NewKeyIndex(0, func(v uint32) string { return keys[v] })
	ref := map[string]uint32{}
	for step := range 200_000 {
		k := fmt.Sprintf("key-%d", rng.IntN(universe))
		switch op := rng.IntN(10); {
		case op < 4: // put: a new number for k, new or not
			keys = append(keys, k)
			x.Put(k, uint32(len(keys)-1))
			ref[k] = uint32(len(keys) - 1)
		case op < 5: // add: a number for k if it has none
			keys = append(keys, k)
			_, had := ref[k]
			if added := x.Add(k, uint32(len(keys)-1)); added == had {
				t.Fatalf("step %d: Add(%q) = %v with the key there %v", step, k, added, had)
			}
			if !had {
				ref[k] = uint32(len(keys) - 1)
			}
		case op < 8:
			v, had := ref[k]
			if got := x.Delete(k); got != had {
				t.Fatalf("step %d: Delete(%q) = %v, want %v", step, k, got, had)
			}
			if had {
				keys[v] = "" // the owner forgets it after
				delete(ref, k)
			}
		default:
			v, ok := x.Get(k)
			if want, had := ref[k]; ok != had || v != want {
				t.Fatalf("step %d: Get(%q) = %d, %v; want %d, %v", step, k, v, ok, want, had)
			}
		}
		if x.Len() != len(ref) {
			t.Fatalf("step %d: Len %d, want %d", step, x.Len(), len(ref))
		}
	}
	for k, want := range ref {
		if v, ok := x.Get(k); !ok || v != want {
			t.Fatalf("Get(%q) = %d, %v; want %d", k, v, ok, want)
		}
	}
	if _, ok := x.Get("never put"); ok {
		t.Fatal("a key never put found")
	}
	if used := x.Len() * 4; used > len(x.slots)*3 {
		t.Fatalf("%d keys in %d slots: over three quarters", x.Len(), len(x.slots))
	}
}

// TestKeyIndexReset: a reset index is empty, with room for what it was
// told.
func TestKeyIndexReset(t *testing.T) {
	keys := []string{"a", "b"}
	x := NewKeyIndex(2, func(v uint32) string { return keys[v] })
	x.Put("a", 0)
	x.Put("b", 1)
	x.Reset(1000)
	if x.Len() != 0 || len(x.slots) < 1334 {
		t.Fatalf("after Reset: %d keys, %d slots", x.Len(), len(x.slots))
	}
	if _, ok := x.Get("a"); ok {
		t.Fatal("a key found after Reset")
	}
}
