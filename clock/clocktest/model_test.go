package clocktest_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/clock/clocktest"
)

// modelTimer is a timer as the doc comments describe it.
type modelTimer struct {
	tm     clock.Timer
	isFunc bool
	armed  bool
	at     time.Time
	seq    int
	buf    []time.Time // a channel timer's undrained fire (at most one)
}

// clockModel is what the doc comments of Clock promise, kept by hand.
type clockModel struct {
	now    time.Time
	seq    int
	timers []*modelTimer
	fired  []string // "id@instant", in fire order
}

func (m *clockModel) arm(mt *modelTimer, d time.Duration) {
	mt.armed, mt.at, mt.seq = true, m.now.Add(max(d, 0)), m.seq
	m.seq++
	if d <= 0 {
		m.move(m.now)
	}
}

// move fires the armed timers due by target in (instant, arming) order.
func (m *clockModel) move(target time.Time) {
	if target.Before(m.now) {
		m.now = target
		return
	}
	for {
		var next *modelTimer
		for _, mt := range m.timers {
			if mt.armed && !mt.at.After(target) && (next == nil || mt.at.Before(next.at) || mt.at.Equal(next.at) && mt.seq < next.seq) {
				next = mt
			}
		}
		if next == nil {
			break
		}
		next.armed = false
		m.now = next.at
		if next.isFunc {
			m.fired = append(m.fired, fmt.Sprintf("%d@%v", slices.Index(m.timers, next), next.at.Sub(start)))
		} else if len(next.buf) == 0 {
			next.buf = append(next.buf, next.at)
		}
	}
	m.now = target
}

// Every sequence of arms, stops, resets, receives and moves of the clock
// behaves as the doc comments say: callbacks run in (instant, arming) order
// with Now at their instant, Stop and Reset report whether the timer was
// armed, a channel keeps one undrained fire, and Pending and Next count and
// lead the armed timers.
func TestClockFollowsItsModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		clk := clocktest.New(start)
		m := &clockModel{now: start}
		var fired []string
		dur := func(label string, lo, hi int) time.Duration {
			return time.Duration(rapid.IntRange(lo, hi).Draw(rt, label)) * time.Millisecond
		}
		pick := func() *modelTimer {
			return m.timers[rapid.IntRange(0, len(m.timers)-1).Draw(rt, "timer")]
		}
		rt.Repeat(map[string]func(*rapid.T){
			"arm": func(rt *rapid.T) {
				d := dur("d", -2, 20)
				mt := &modelTimer{isFunc: rapid.Bool().Draw(rt, "func")}
				id := len(m.timers)
				m.timers = append(m.timers, mt)
				if mt.isFunc {
					mt.tm = clk.AfterFunc(d, func() {
						fired = append(fired, fmt.Sprintf("%d@%v", id, clk.Now().Sub(start)))
					})
				} else {
					mt.tm = clk.NewTimer(d)
				}
				m.arm(mt, d)
			},
			"stop": func(rt *rapid.T) {
				if len(m.timers) == 0 {
					rt.Skip("no timer")
				}
				mt := pick()
				if got := mt.tm.Stop(); got != mt.armed {
					rt.Fatalf("Stop = %v, want %v", got, mt.armed)
				}
				mt.armed = false
			},
			"reset": func(rt *rapid.T) {
				if len(m.timers) == 0 {
					rt.Skip("no timer")
				}
				mt := pick()
				d := dur("d", -2, 20)
				want := mt.armed
				if got := mt.tm.Reset(d); got != want {
					rt.Fatalf("Reset = %v, want %v", got, want)
				}
				m.arm(mt, d)
			},
			"receive": func(rt *rapid.T) {
				if len(m.timers) == 0 {
					rt.Skip("no timer")
				}
				mt := pick()
				if mt.isFunc {
					rt.Skip("callback timer")
				}
				select {
				case v := <-mt.tm.C():
					if len(mt.buf) == 0 || !v.Equal(mt.buf[0]) {
						rt.Fatalf("received %v, want %v", v, mt.buf)
					}
					mt.buf = nil
				default:
					if len(mt.buf) != 0 {
						rt.Fatalf("channel empty, want %v", mt.buf[0])
					}
				}
			},
			"advance": func(rt *rapid.T) {
				d := dur("d", 0, 15)
				clk.Advance(d)
				m.move(m.now.Add(d))
			},
			"set": func(rt *rapid.T) {
				to := m.now.Add(dur("by", -10, 15))
				clk.Set(to)
				m.move(to)
			},
			"": func(rt *rapid.T) {
				if !slices.Equal(fired, m.fired) {
					rt.Fatalf("callbacks ran as %v, want %v", fired, m.fired)
				}
				if got := clk.Now(); !got.Equal(m.now) {
					rt.Fatalf("Now = %v, want %v", got.Sub(start), m.now.Sub(start))
				}
				var armed []*modelTimer
				for _, mt := range m.timers {
					if mt.armed {
						armed = append(armed, mt)
					}
				}
				if got := clk.Pending(); got != len(armed) {
					rt.Fatalf("Pending = %d, want %d", got, len(armed))
				}
				next, ok := clk.Next()
				if ok != (len(armed) > 0) {
					rt.Fatalf("Next reports %v with %d armed", ok, len(armed))
				}
				if ok {
					first := slices.MinFunc(armed, func(a, b *modelTimer) int { return a.at.Compare(b.at) })
					if !next.Equal(first.at) {
						rt.Fatalf("Next = %v, want %v", next.Sub(start), first.at.Sub(start))
					}
				}
			},
		})
	})
}
