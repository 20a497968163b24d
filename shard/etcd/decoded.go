package etcd

import (
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Decoded is the Follower of a prefix whose values decode into T (rules,
// grants): it holds every key whose value decodes, lists every key whose
// value does not as invalid (it holds nothing for it: the key counts as
// absent, whatever it held before), and after each list and each watch
// response hands the whole set, in key order, to onChange. So the set is a
// function of what etcd holds alone, the same for every follower whenever
// it started.
type Decoded[T any] struct {
	decode func(key string, value []byte) (T, error)
	// onInvalid hears each value that does not decode; dropped tells
	// whether the key held a valid value until then.
	onInvalid func(key string, err error, dropped bool)
	onChange  func(valid []T, invalid []string, rev int64)
	valid     map[string]T
	invalid   map[string]bool
}

// NewDecoded returns a Decoded that decodes each value with decode.
func NewDecoded[T any](decode func(key string, value []byte) (T, error),
	onInvalid func(key string, err error, dropped bool), onChange func(valid []T, invalid []string, rev int64)) *Decoded[T] {
	return &Decoded[T]{decode: decode, onInvalid: onInvalid, onChange: onChange, valid: map[string]T{}, invalid: map[string]bool{}}
}

// Reset implements Follower.
func (d *Decoded[T]) Reset(kvs []*mvccpb.KeyValue, rev int64) {
	before := d.valid
	d.valid, d.invalid = make(map[string]T, len(kvs)), map[string]bool{}
	for _, kv := range kvs {
		d.put(kv, before)
	}
	d.changed(rev)
}

// Apply implements Follower.
func (d *Decoded[T]) Apply(events []*clientv3.Event, rev int64) {
	for _, ev := range events {
		if ev.Type == mvccpb.DELETE {
			delete(d.valid, string(ev.Kv.Key))
			delete(d.invalid, string(ev.Kv.Key))
			continue
		}
		d.put(ev.Kv, d.valid)
	}
	d.changed(rev)
}

// put decodes kv into the set; before is what the set held until now.
func (d *Decoded[T]) put(kv *mvccpb.KeyValue, before map[string]T) {
	key := string(kv.Key)
	v, err := d.decode(key, kv.Value)
	if err != nil {
		_, dropped := before[key]
		d.onInvalid(key, err, dropped)
		delete(d.valid, key)
		d.invalid[key] = true
		return
	}
	d.valid[key] = v
	delete(d.invalid, key)
}

func (d *Decoded[T]) changed(rev int64) {
	keys := make([]string, 0, len(d.valid))
	for k := range d.valid {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	valid := make([]T, 0, len(keys))
	for _, k := range keys {
		valid = append(valid, d.valid[k])
	}
	var invalid []string
	for k := range d.invalid {
		invalid = append(invalid, k)
	}
	slices.Sort(invalid)
	d.onChange(valid, invalid, rev)
}
