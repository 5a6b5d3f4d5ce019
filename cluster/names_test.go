package cluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/memoria-ai/memoria/memory/base"
)

// TestNamesAreClaimedInEtcd: a name another member registered in etcd is
// refused here (409 exists) though this store has no sona of that name;
// concurrent creations of one name on this member give one sona; a
// duplicate name is created when asked; the names of created sonas are no longer bound to the lease.
func TestNamesAreClaimedInEtcd(t *testing.T) {
	url := startEtcd(t)
	c := startMember(t, url)
	cl := etcdClient(t, url)
	ctx := context.Background()
	if _, err := cl.Put(ctx, "/memoria/names/taken/5f0d6f7e-2b7b-4c51-9d1e-6a9c1b9e0a11", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSona(ctx, "taken", true); !errors.Is(err, base.ErrExists) {
		t.Fatalf("a name another member has: %v, want ErrExists", err)
	}
	if ids, _ := c.self.Sonas.Named("taken"); len(ids) != 0 {
		t.Fatalf("the refused creation left sonas here: %v", ids)
	}
	if _, err := c.CreateSona(ctx, "taken", false); err != nil {
		t.Fatalf("a duplicate name, asked for: %v", err)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for range 8 {
		wg.Go(func() {
			_, err := c.CreateSona(ctx, "once", true)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.Is(err, base.ErrExists):
				refused++
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	if created != 1 || refused != 7 {
		t.Fatalf("8 creations of one name: %d created, %d refused", created, refused)
	}
	r, err := cl.Get(ctx, "/memoria/names/once/", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease != 0 {
		t.Fatalf("the name in etcd: %v %+v", err, r.Kvs)
	}

	if _, err := c.CreateSona(ctx, "bad/name", true); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("an invalid name: %v", err)
	}
	// A sona of this store that etcd does not know (from before the
	// cluster) has its name too.
	rec, err := c.self.Sonas.Create(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSona(ctx, "local", true); !errors.Is(err, base.ErrExists) || !strings.Contains(err.Error(), rec.Uuid) {
		t.Fatalf("a name only this store has: %v", err)
	}
	if r, err := cl.Get(ctx, "/memoria/names/local/", clientv3.WithPrefix()); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("a refused creation claimed the name: %v %d", err, len(r.Kvs))
	}
}
