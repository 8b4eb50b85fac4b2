package interruption

import "sync"

// rememberedMessages bounds how many handled MessageIds a receiver keeps to
// recognise duplicate deliveries: at ~40 bytes each, well under a megabyte,
// and far more than arrive within a visibility timeout.
const rememberedMessages = 10000

type deliveryState int

const (
	deliveryNew deliveryState = iota
	deliveryInProgress
	deliveryDone
)

// deliveries tracks which MessageIds are being handled and which were
// handled and deleted recently (the last capacity of them), so that a
// duplicate delivery is neither handled nor counted twice.
type deliveries struct {
	mu         sync.Mutex
	inProgress map[string]bool
	done       map[string]bool
	ring       []string
	next       int
}

func newDeliveries(capacity int) deliveries {
	return deliveries{inProgress: map[string]bool{}, done: map[string]bool{}, ring: make([]string, capacity)}
}

// begin claims id for the caller when it is new. An empty id (never sent by
// SQS) is always new.
func (d *deliveries) begin(id string) deliveryState {
	if id == "" {
		return deliveryNew
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.inProgress[id]:
		return deliveryInProgress
	case d.done[id]:
		return deliveryDone
	}
	d.inProgress[id] = true
	return deliveryNew
}

// end releases id; deleted remembers it as done, otherwise a later delivery
// is handled afresh.
func (d *deliveries) end(id string, deleted bool) {
	if id == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.inProgress, id)
	if !deleted || d.done[id] {
		return
	}
	if old := d.ring[d.next]; old != "" {
		delete(d.done, old)
	}
	d.ring[d.next] = id
	d.done[id] = true
	d.next = (d.next + 1) % len(d.ring)
}
