package walltimer

import (
	"testing"
	"time"
)

// A fire is never early (RL-9 rests on it): whatever path a timer takes
// (due already, inside Window, beyond it), the instant it delivers is at or
// after the one it was armed for.
func TestFiresNeverEarly(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 0, 1, 300 * time.Microsecond, Window / 2, Window, Window + 700*time.Microsecond} {
		before := time.Now()
		tm := New(d)
		at := <-tm.C()
		if want := before.Add(max(d, 0)); at.Before(want) {
			t.Errorf("New(%v) fired at %v, %v before its instant", d, at, want.Sub(at))
		}
		if tm.Stop() {
			t.Errorf("New(%v): Stop after the fire = true, want false", d)
		}
	}
}

func TestStopBeforeTheWindow(t *testing.T) {
	tm := New(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer = false")
	}
	if tm.Stop() {
		t.Fatal("second Stop = true")
	}
	// Reset after Stop arms it again and it fires exactly once.
	before := time.Now()
	if tm.Reset(Window / 4) {
		t.Fatal("Reset of a stopped timer reported it active")
	}
	if at := <-tm.C(); at.Before(before.Add(Window / 4)) {
		t.Fatalf("fired %v early", before.Add(Window/4).Sub(at))
	}
	select {
	case at := <-tm.C():
		t.Fatalf("second fire at %v", at)
	default:
	}
}

// holdSleep replaces the fine sleep: the first call reports on entered and
// blocks until release is closed; later calls return at once (the fine
// loop then polls the clock until its instant). Every fine goroutine's end
// is reported on ended.
func holdSleep(t *testing.T) (entered chan struct{}, release chan struct{}, ended chan struct{}) {
	entered, release, ended = make(chan struct{}), make(chan struct{}), make(chan struct{}, 8)
	first := true
	old := sleep
	sleep = func(time.Duration) {
		if first {
			first = false
			close(entered)
			<-release
		}
	}
	testHookFineDone = func() { ended <- struct{}{} }
	t.Cleanup(func() { sleep, testHookFineDone = old, nil })
	return entered, release, ended
}

// A Stop that lands while the fine sleep is in the kernel wins: the sleep's
// goroutine wakes and delivers nothing.
func TestStopDuringTheFineSleep(t *testing.T) {
	entered, release, ended := holdSleep(t)
	tm := New(Window / 2)
	<-entered
	if !tm.Stop() {
		t.Fatal("Stop during the fine sleep = false")
	}
	close(release)
	<-ended
	select {
	case at := <-tm.C():
		t.Fatalf("a stopped timer fired at %v", at)
	default:
	}
	if tm.Stop() {
		t.Fatal("Stop after Stop = true")
	}
}

// A Reset during the fine sleep replaces it: only the new instant fires,
// once.
func TestResetDuringTheFineSleep(t *testing.T) {
	entered, release, ended := holdSleep(t)
	tm := New(Window / 2)
	<-entered
	before := time.Now()
	if !tm.Reset(Window / 4) {
		t.Fatal("Reset during the fine sleep reported the timer inactive")
	}
	at := <-tm.C()
	if at.Before(before.Add(Window / 4)) {
		t.Fatalf("the re-armed timer fired %v early", before.Add(Window/4).Sub(at))
	}
	<-ended // the new arm's goroutine
	close(release)
	<-ended // the old one, which must drop its wake
	select {
	case at := <-tm.C():
		t.Fatalf("the replaced instant fired too, at %v", at)
	default:
	}
}

// A timer stopped during its final stretch lets its thread go after the
// slice in progress, not at its instant: each kernel sleep is at most one
// slice, and none follows the Stop.
func TestStoppedTimerSleepsNoFurther(t *testing.T) {
	asked := make(chan time.Duration)
	release := make(chan struct{})
	ended := make(chan struct{}, 1)
	old := sleep
	sleep = func(d time.Duration) {
		asked <- d
		<-release
	}
	testHookFineDone = func() { ended <- struct{}{} }
	t.Cleanup(func() { sleep, testHookFineDone = old, nil })

	tm := New(Window - 100*time.Microsecond)
	if d := <-asked; d > slice {
		t.Fatalf("one kernel sleep of %v, more than a slice (%v)", d, slice)
	}
	tm.Stop()
	release <- struct{}{}
	select {
	case d := <-asked:
		t.Fatalf("the stopped timer slept again, for %v", d)
	case <-ended:
	}
}

// Many timers at once, half of them stopped or reset while they may be in
// either stretch: each live one fires exactly once, never early, and a
// stopped one never fires.
func TestManyTimersStopAndReset(t *testing.T) {
	const n = 400
	type armed struct {
		tm      *Timer
		due     time.Time
		stopped bool
	}
	ts := make([]armed, n)
	for i := range ts {
		d := time.Duration(i%7) * Window / 3 // 0 .. 4 ms: both stretches
		before := time.Now()
		ts[i] = armed{tm: New(d), due: before.Add(d)}
	}
	for i := range ts {
		switch i % 4 {
		case 1:
			ts[i].stopped = ts[i].tm.Stop()
		case 2:
			d := time.Duration(i%5) * Window / 4
			before := time.Now()
			if ts[i].tm.Reset(d) {
				ts[i].due = before.Add(d)
			} else {
				// It had fired already; drain that fire and expect the new one.
				<-ts[i].tm.C()
				ts[i].due = before.Add(d)
			}
		}
	}
	for i, a := range ts {
		if a.stopped {
			continue
		}
		at := <-a.tm.C()
		if at.Before(a.due) {
			t.Errorf("timer %d fired %v early", i, a.due.Sub(at))
		}
	}
	// Every timer has had its fire or its Stop; none may deliver again.
	for _, a := range ts {
		if a.tm.Stop() {
			t.Fatalf("a timer still armed after its fire")
		}
	}
	for i, a := range ts {
		select {
		case at := <-a.tm.C():
			t.Errorf("timer %d (stopped %v) delivered a second time, at %v", i, a.stopped, at)
		default:
		}
	}
}
