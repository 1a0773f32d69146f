package qlock

import (
	"log/slog"
	"testing"
	"time"
)

// TestSlotBook checks that a session's acquisitions of one semaphore share
// one book while any of them is in flight or a slot is reserved, that
// Free wakes a waiter on Freed, and that an idle book is dropped.
func TestSlotBook(t *testing.T) {
	st := NewState(Backend{Name: "etcd", Pkg: "etcdlock"}, slog.New(slog.DiscardHandler), "", 0, time.Now().Add(time.Minute), Observe{})
	defer st.End(nil)
	a, b := st.openSlots("sem"), st.openSlots("sem")
	if a != b {
		t.Fatal("two acquisitions of one semaphore got different books")
	}
	if other := st.openSlots("other"); other == a {
		t.Fatal("two semaphores share a book")
	} else {
		other.close()
	}
	if !a.Reserve("k") || b.Reserve("k") || !b.Reserved("k") {
		t.Fatal("a reservation is not seen by the book's other user")
	}
	freed := b.Freed()
	a.close()
	b.close()
	if c := st.openSlots("sem"); c != a {
		t.Fatal("a book with a reserved slot was dropped")
	} else {
		c.close()
	}
	a.Free("k") // the held permit's release, after its acquisition ended
	select {
	case <-freed:
	default:
		t.Fatal("Free did not close Freed")
	}
	st.slotMu.Lock()
	n := len(st.books)
	st.slotMu.Unlock()
	if n != 0 {
		t.Fatalf("%d books left once idle", n)
	}
	if c := st.openSlots("sem"); c == a || c.Reserved("k") {
		t.Fatal("an idle book was kept")
	} else {
		c.close()
	}
}
