package controller

import (
	"k8s.io/client-go/tools/cache"
)

// MaxUrgentRun is how many urgent keys UrgentFirst hands out in a row while other keys
// wait: one other key follows, so that they keep moving whatever the urgent lane holds.
const MaxUrgentRun = 8

// UrgentFirst is a work queue order (client-go's workqueue.Queue, LoopConfig.Order) with
// two lanes, each first in first out: a key that urgent reports as urgent when it is
// queued, or queued again while it waits, goes in the urgent lane, which is served first,
// MaxUrgentRun keys at most in a row while the other lane waits. A key moves from the
// other lane to the urgent one when it is queued again and has become urgent, never
// back. The work queue calls it under its own lock: urgent must be quick and must not
// queue anything.
type UrgentFirst struct {
	urgent func(cache.ObjectName) bool
	lanes  [2][]queued
	// live is where each queued key's entry is: a moved key leaves a stale entry behind
	// in the other lane, told apart by its sequence number.
	live map[cache.ObjectName]queued
	seq  uint64
	// run counts the urgent keys handed out in a row.
	run int
}

// Lanes of UrgentFirst.
const (
	urgentLane = 0
	otherLane  = 1
)

type queued struct {
	key  cache.ObjectName
	lane int
	seq  uint64
}

// NewUrgentFirst returns an empty UrgentFirst order that asks urgent about each key.
func NewUrgentFirst(urgent func(cache.ObjectName) bool) *UrgentFirst {
	return &UrgentFirst{urgent: urgent, live: map[cache.ObjectName]queued{}}
}

// Push queues key at the end of its lane.
func (q *UrgentFirst) Push(key cache.ObjectName) {
	lane := otherLane
	if q.urgent(key) {
		lane = urgentLane
	}
	q.put(key, lane)
}

// Touch moves a waiting key that has become urgent to the end of the urgent lane.
func (q *UrgentFirst) Touch(key cache.ObjectName) {
	if e, ok := q.live[key]; ok && e.lane == otherLane && q.urgent(key) {
		q.put(key, urgentLane)
	}
}

func (q *UrgentFirst) put(key cache.ObjectName, lane int) {
	q.seq++
	e := queued{key: key, lane: lane, seq: q.seq}
	q.live[key] = e
	q.lanes[lane] = append(q.lanes[lane], e)
}

// Len is the number of queued keys.
func (q *UrgentFirst) Len() int {
	return len(q.live)
}

// Pop takes the next key: the urgent lane's first unless MaxUrgentRun urgent keys went in
// a row and another waits. The work queue calls it only when Len is not 0.
func (q *UrgentFirst) Pop() cache.ObjectName {
	q.dropStale(urgentLane)
	q.dropStale(otherLane)
	lane := urgentLane
	if len(q.lanes[urgentLane]) == 0 || (q.run >= MaxUrgentRun && len(q.lanes[otherLane]) > 0) {
		lane = otherLane
	}
	if lane == urgentLane {
		q.run++
	} else {
		q.run = 0
	}
	e := q.lanes[lane][0]
	q.lanes[lane][0] = queued{}
	q.lanes[lane] = q.lanes[lane][1:]
	delete(q.live, e.key)
	return e.key
}

// dropStale removes the entries at the head of lane that a move left behind.
func (q *UrgentFirst) dropStale(lane int) {
	for len(q.lanes[lane]) > 0 {
		e := q.lanes[lane][0]
		if live, ok := q.live[e.key]; ok && live.seq == e.seq {
			return
		}
		q.lanes[lane][0] = queued{}
		q.lanes[lane] = q.lanes[lane][1:]
	}
}
