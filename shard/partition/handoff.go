package partition

// Phase is a step of one hand-off, as HandOff runs it; see the package
// documentation.
type Phase string

// The phases of a hand-off, in order.
const (
	PhaseCopy      Phase = "copy"
	PhaseCopyAgain Phase = "copy again"
	PhaseSwitch    Phase = "switch"
	PhaseSettle    Phase = "settle"
	PhaseDrop      Phase = "drop"
	PhaseDone      Phase = "done"
)

// Copy is one pair's copy, as a copy phase asks for it: the flags of the
// destination's pull.
type Copy struct {
	// Journal: the source journals the keys that change from now on
	// (FirstExport). Fence: the source stops deciding them first
	// (FencedExport). Final: the final copy (FinalExport), of the whole
	// partitions if Whole (the pair's first copy failed), else of what the
	// journal recorded.
	Journal, Fence, Final, Whole bool
}

// HandOff is the step order of one hand-off over Pairs (source,
// destination) pairs, numbered from 0, and its decisions: the driver
// (package handoff's Move, the simulation) tells it each event and
// performs the phase it returns, with the copies and pairs it names. It
// does no I/O, reads no clock and starts no goroutine; the package
// documentation has its table. Set the fields, then Start.
type HandOff struct {
	// Pairs is how many pairs move.
	Pairs int
	// Strict stops the hand-off when a first copy failed, before anything
	// is fenced, and nothing switches.
	Strict bool
	// Fence makes the one copy a fenced one; with no Switch, the owners
	// changed already (a shard giving back what it lost with its lease).
	Fence bool
	// Switch: there is a switch (without, the hand-off ends after its
	// first copy).
	Switch bool
	// Settle: wait for routers after the switch, unless SkipEmptySettle
	// and there was nothing to hand over (no key streamed, no copy
	// failed).
	Settle, SkipEmptySettle bool
	// Drop: the sources of the pairs handed over forget them at the end.
	Drop bool

	phase    Phase
	failed   [2][]bool // per copy phase (first, final), per pair
	last     int       // the last copy phase begun: 0 first, 1 final
	copying  int       // the copies of the phase not ended yet
	keys     uint64    // streamed over both copies
	switched bool
}

// Start begins the hand-off: its first copy.
func (h *HandOff) Start() Phase {
	h.failed = [2][]bool{make([]bool, h.Pairs), make([]bool, h.Pairs)}
	return h.enter(PhaseCopy)
}

// Phase returns the step under way.
func (h *HandOff) Phase() Phase { return h.phase }

// Copy returns the copy that the phase under way asks of pair i.
func (h *HandOff) Copy(i int) Copy {
	switch {
	case h.phase == PhaseCopyAgain:
		return Copy{Final: true, Whole: h.failed[0][i]}
	case h.Fence:
		return Copy{Fence: true}
	default:
		return Copy{Journal: true}
	}
}

// Copied is the end of pair i's copy in the phase under way (ok: it
// succeeded), which streamed keys. It reports whether every pair's copy
// of the phase has ended: then the driver steps CopiesEnded.
func (h *HandOff) Copied(i int, ok bool, keys uint64) (all bool) {
	h.failed[h.last][i] = !ok
	h.keys += keys
	h.copying--
	return h.copying == 0
}

// CopiesEnded is the end of every pair's copy in the phase under way; it
// returns the next phase.
func (h *HandOff) CopiesEnded() Phase {
	switch {
	case h.phase == PhaseCopyAgain, h.Pairs == 0 && h.Switch:
		return h.enter(PhaseSwitch)
	case !h.Switch, h.Strict && len(h.NotHandedOver()) > 0:
		return h.enter(PhaseDone)
	}
	return h.enter(PhaseCopyAgain)
}

// SwitchEnded is the end of the switch (ok: it succeeded); it returns the
// next phase.
func (h *HandOff) SwitchEnded(ok bool) Phase {
	h.switched = ok
	switch {
	case !ok || h.Pairs == 0:
		return h.enter(PhaseDone)
	case h.Settle && !(h.SkipEmptySettle && h.keys == 0 && len(h.NotHandedOver()) == 0):
		return h.enter(PhaseSettle)
	}
	return h.SettleEnded()
}

// SettleEnded is the end of the settle; it returns the next phase.
func (h *HandOff) SettleEnded() Phase {
	if h.Drop {
		return h.enter(PhaseDrop)
	}
	return h.enter(PhaseDone)
}

// DropsEnded is the end of the drops; the hand-off is done.
func (h *HandOff) DropsEnded() Phase { return h.enter(PhaseDone) }

// Switched reports whether the switch ran and succeeded.
func (h *HandOff) Switched() bool { return h.switched }

// NotHandedOver returns the pairs whose last copy failed, in order.
func (h *HandOff) NotHandedOver() []int {
	return h.pairsWhere(true)
}

// HandedOver returns the pairs whose last copy succeeded, in order: the
// drop phase has their sources forget their partitions.
func (h *HandOff) HandedOver() []int {
	return h.pairsWhere(false)
}

// pairsWhere returns the pairs, in order, whose last copy failed or not.
func (h *HandOff) pairsWhere(failed bool) []int {
	var out []int
	for i, f := range h.failed[h.last] {
		if f == failed {
			out = append(out, i)
		}
	}
	return out
}

// enter makes p the phase under way and returns it.
func (h *HandOff) enter(p Phase) Phase {
	h.phase = p
	if p == PhaseCopyAgain {
		h.last = 1
	}
	if p == PhaseCopy || p == PhaseCopyAgain {
		h.copying = h.Pairs
	}
	return p
}
