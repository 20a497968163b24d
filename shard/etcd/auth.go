package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RootUser is etcd's administrator: the user that sets authentication up.
const RootUser = "root"

// EnableAuth sets etcd's authentication up for the cluster under l and
// turns it on: a role per component of users (component → etcd user: the
// common name of the component's etcd client certificate, which etcd
// takes as the user with --client-cert-auth) that reads l.Reads() and
// writes only l.Writes(component), a user holding it, and root. Users
// have no password: they authenticate by certificate only. It may run
// again: what exists is kept, and permissions are granted again. cli must
// act as root once authentication is on. The Kubernetes manifests' Job
// shardlimit-etcd-auth runs this same function (`shardlimit etcd auth`).
func EnableAuth(ctx context.Context, cli *clientv3.Client, l Layout, users map[string]string) error {
	exists := func(err error) error {
		if errors.Is(err, rpctypes.ErrUserAlreadyExist) || errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
			return nil
		}
		return err
	}
	noPassword := &clientv3.UserAddOptions{NoPassword: true}
	if err := exists(addUser(ctx, cli, RootUser, noPassword)); err != nil {
		return fmt.Errorf("etcd user %s: %w", RootUser, err)
	}
	if err := exists(addRole(ctx, cli, RootUser)); err != nil {
		return fmt.Errorf("etcd role %s: %w", RootUser, err)
	}
	if _, err := cli.UserGrantRole(ctx, RootUser, RootUser); err != nil {
		return fmt.Errorf("etcd user %s: %w", RootUser, err)
	}
	for _, c := range Components {
		user, ok := users[c]
		if !ok {
			return fmt.Errorf("etcd users: no user for component %s", c)
		}
		if err := exists(addRole(ctx, cli, user)); err != nil {
			return fmt.Errorf("etcd role %s: %w", user, err)
		}
		if err := grant(ctx, cli, user, l.Reads(), clientv3.PermissionType(clientv3.PermRead)); err != nil {
			return err
		}
		for _, r := range l.Writes(c) {
			if err := grant(ctx, cli, user, r, clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
				return err
			}
		}
		if err := exists(addUser(ctx, cli, user, noPassword)); err != nil {
			return fmt.Errorf("etcd user %s: %w", user, err)
		}
		if _, err := cli.UserGrantRole(ctx, user, user); err != nil {
			return fmt.Errorf("etcd user %s: %w", user, err)
		}
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("etcd auth enable: %w", err)
	}
	return nil
}

func addUser(ctx context.Context, cli *clientv3.Client, name string, o *clientv3.UserAddOptions) error {
	_, err := cli.UserAddWithOptions(ctx, name, "", o)
	return err
}

func addRole(ctx context.Context, cli *clientv3.Client, name string) error {
	_, err := cli.RoleAdd(ctx, name)
	return err
}

// grant gives role the permission t over r.
func grant(ctx context.Context, cli *clientv3.Client, role string, r Range, t clientv3.PermissionType) error {
	end := ""
	if r.Prefix {
		end = clientv3.GetPrefixRangeEnd(r.Key)
	}
	if _, err := cli.RoleGrantPermission(ctx, role, r.Key, end, t); err != nil {
		return fmt.Errorf("etcd role %s, %s: %w", role, r, err)
	}
	return nil
}
