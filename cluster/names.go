package cluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/memoria-ai/memoria/memory/base"
	memchain "github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/messages"
)

// CreateSona creates a sona through this member (api.SonaCreator): when
// unique, its name is first claimed cluster-wide — <prefix>/names/<name>/<uuid>,
// put by a transaction that succeeds only if no key under
// <prefix>/names/<name>/ exists, so two members creating one name at once
// never both succeed. The claim is bound to this member's lease until the
// sona is registered (a member that dies in between frees the name); then
// the sona is created here, claimed, registered in etcd and adopted by
// R-1 replicas before it is acknowledged.
func (c *Cluster) CreateSona(ctx context.Context, name string, unique bool) (*messages.Sona, error) {
	if err := memchain.ValidateSonaName(name); err != nil {
		return nil, err
	}
	if unique {
		// A sona of this store that etcd does not know (from before the
		// cluster) counts too.
		if ids, err := c.self.Sonas.Named(name); err != nil {
			return nil, err
		} else if len(ids) > 0 {
			return nil, nameTaken(name, ids[0])
		}
	}
	if !c.node.Healthy() {
		return nil, fmt.Errorf("%w: cannot create sona %q", ErrEtcdUnavailable, name)
	}
	rec := &messages.Sona{Uuid: uuid.NewString(), Name: name, CreatedAt: c.clock.Now().Unix()}
	if err := c.claimName(ctx, rec, unique); err != nil {
		return nil, err
	}
	if _, err := c.self.Sonas.Adopt(ctx, rec); err != nil {
		c.freeName(rec)
		return nil, err
	}
	if err := c.chains.Created(ctx, rec); err != nil {
		c.freeName(rec) // a no-op once the sona was registered
		return nil, err
	}
	return c.self.Sonas.Get(rec.Uuid)
}

// claimName puts rec's name key bound to this member's lease; when
// unique, only if no sona has the name in etcd.
func (c *Cluster) claimName(ctx context.Context, rec *messages.Sona, unique bool) error {
	n := c.node
	lease, _ := n.Lease()
	prefix := n.keys.names(rec.Name)
	var cmps []clientv3.Cmp
	if unique {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(prefix), "=", 0).WithPrefix())
	}
	rctx, cancel := n.request(ctx)
	defer cancel()
	resp, err := n.client.Txn(rctx).If(cmps...).
		Then(clientv3.OpPut(prefix+rec.Uuid, "", clientv3.WithLease(lease))).
		Else(clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1))).
		Commit()
	if err != nil {
		n.failed()
		return fmt.Errorf("%w: claim the sona name %q: %v", ErrEtcdUnavailable, rec.Name, err)
	}
	n.answered()
	if !resp.Succeeded {
		other := ""
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			other = strings.TrimPrefix(string(kvs[0].Key), prefix)
		}
		return nameTaken(rec.Name, other)
	}
	return nil
}

// freeName deletes rec's name key while it is still only claimed (bound
// to a lease): a creation that failed before the sona was registered.
func (c *Cluster) freeName(rec *messages.Sona) {
	n := c.node
	key := n.keys.names(rec.Name) + rec.Uuid
	rctx, cancel := n.request(context.Background())
	defer cancel()
	_, err := n.client.Txn(rctx).If(clientv3.Compare(clientv3.LeaseValue(key), "!=", clientv3.NoLease)).
		Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		c.log.Debug("free a sona name", "name", rec.Name, "err", err) // the lease frees it anyway
	}
}

func nameTaken(name, other string) error {
	return fmt.Errorf("%w: a sona is called %q already (%s) in the cluster: choose another name, or ask for a duplicate name", base.ErrExists, name, other)
}
