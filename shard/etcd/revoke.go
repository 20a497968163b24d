package etcd

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Revoke revokes lease, and deletes the keys attached to it. A lease that
// is not found is revoked already: the client retries a revoke whose
// connection failed (a keep-alive timeout on a loaded machine) after the
// server may have applied it, and the retry finds no lease.
func Revoke(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID) error {
	_, err := cli.Revoke(ctx, lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}
