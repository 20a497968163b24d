package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	etcdclient "github.com/shardlimit/shardlimit/shard/etcd"
)

// startEtcd runs `shardlimit etcd` and waits for its ready line.
func startEtcd(t *testing.T, bin, dir, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "etcd", "--data-dir", dir, "--listen", addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), etcdReadyPrefix) {
				ready <- sc.Text()
			}
		}
	}()
	select {
	case line := <-ready:
		if want := "client address " + addr + ", data in " + dir; !strings.Contains(line, want) {
			t.Fatalf("ready line %q lacks %q", line, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line within 30s")
	}
	return cmd
}

// stopEtcd sends SIGTERM and expects a clean exit.
func stopEtcd(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("etcd exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("etcd did not stop within 30s of SIGTERM")
	}
}

// `shardlimit etcd` serves clients, stops on SIGTERM, and started again
// on the same data dir and address serves the same keys.
func TestEtcdServesStopsAndKeepsItsData(t *testing.T) {
	bin := buildBinary(t)
	dir, addr := t.TempDir(), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cli, err := etcdclient.Dial([]string{addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	e := startEtcd(t, bin, dir, addr)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	stopEtcd(t, e)

	e = startEtcd(t, bin, dir, addr)
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("after a restart on the same data: %v, %v", resp, err)
	}
	stopEtcd(t, e)
}
