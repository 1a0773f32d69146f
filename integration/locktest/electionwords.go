package locktest

import (
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
)

// electionWords: an election's operations on a term that has ended say
// so in an election's words — "not the leader: this term ended
// (resigned)", "... (handed off)", "not the leader: this term was lost:
// ..." — not in a lock's ("unlock: lock already released", "hold: lock
// lost"), and still match the same sentinels.
func electionWords(t *testing.T, b Backend) {
	const name = "words"
	check := func(what string, err error, words string, sentinels ...error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		msg := err.Error()
		t.Logf("%s: %s", what, msg)
		if !strings.Contains(msg, words) {
			t.Errorf("%s: %q does not say %q", what, msg, words)
		}
		for _, engine := range []string{"unlock:", "hold:", "lock already released", "lock lost"} {
			if strings.Contains(msg, engine) {
				t.Errorf("%s: %q says %q, a lock's words", what, msg, engine)
			}
		}
		for _, s := range append(sentinels, distlock.ErrNotLeader) {
			if !errors.Is(err, s) {
				t.Errorf("%s: %q does not match %v", what, msg, s)
			}
		}
	}

	e := election(t, b.Session(t), name)
	lead, err := e.Campaign(Ctx(t), "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := lead.Resign(Ctx(t)); err != nil {
		t.Fatal(err)
	}
	resigned := "not the leader: this term ended (resigned)"
	check("Proclaim after Resign", lead.Proclaim(Ctx(t), "b"), resigned, distlock.ErrReleased)
	check("Resign after Resign", lead.Resign(Ctx(t)), resigned, distlock.ErrReleased)
	_, err = lead.HandOff(Ctx(t), "")
	check("HandOff after Resign", err, resigned, distlock.ErrReleased)

	// A term handed off.
	lead, err = e.Campaign(Ctx(t), "a")
	if err != nil {
		t.Fatal(err)
	}
	waiting := CampaignAsync(Ctx(t), election(t, b.Session(t), name), "b")
	b.WaitEntries(t, name, 2)
	if _, err := lead.HandOff(Ctx(t), "b"); err != nil {
		t.Fatal(err)
	}
	c := Recv(t, waiting, "the successor's Campaign")
	if c.Err != nil {
		t.Fatal(c.Err)
	}
	check("Proclaim after HandOff", lead.Proclaim(Ctx(t), "c"), "not the leader: this term ended (handed off)", distlock.ErrReleased)
	check("Resign after HandOff", lead.Resign(Ctx(t)), "not the leader: this term ended (handed off)", distlock.ErrReleased)

	// A term lost: the successor's session ends on the server.
	s := b.Session(t)
	lost := election(t, s, name)
	next := CampaignAsync(Ctx(t), lost, "d")
	b.WaitEntries(t, name, 2)
	if err := c.Leadership.Resign(Ctx(t)); err != nil {
		t.Fatal(err)
	}
	d := Recv(t, next, "the next Campaign")
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	s.End(t)
	Recv(t, d.Leadership.Done(), "the lost term's Done")
	check("Proclaim after the loss", d.Leadership.Proclaim(Ctx(t), "e"), "not the leader: this term was lost: ", distlock.ErrLost)
	check("Resign after the loss", d.Leadership.Resign(Ctx(t)), "not the leader: this term was lost: ", distlock.ErrLost)
	check("Resign again after the loss", d.Leadership.Resign(Ctx(t)), "not the leader: this term was lost: ", distlock.ErrLost, distlock.ErrReleased)
	_, err = d.Leadership.HandOff(Ctx(t), "")
	check("HandOff after the loss", err, "not the leader: this term was lost: ", distlock.ErrLost)
}
