// Package runstore is what the rebalance job leaves in etcd besides the
// shard map: one record per run at <prefix>rebalance/runs/, the last Keep
// of them, and the address of the instance that leads the election at
// <prefix>rebalance/election. The job writes them (Update while a run goes
// on, only over its own last write; Record at the end; Abandon for runs a
// dead leader left running); routers' Admin API and ctl read them through
// Runs and Leader, and turn successive records of a run into events with
// the pure function Events, without linking the job itself.
//
// It is only the etcd edge: it must never import the job (package
// rebalance) or a router package.
package runstore
