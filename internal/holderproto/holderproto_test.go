package holderproto

import (
	"bytes"
	"testing"
)

func TestEventRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.Emit(Event{Event: "pong", Held: Bool(false), Lost: Bool(true), Token: "a@1.2"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Emit(Event{Event: "lost", At: 42, Error: "gone"}); err != nil {
		t.Fatal(err)
	}
	sc := NewScanner(&buf)
	var got []Event
	for sc.Scan() {
		e, err := ParseEvent(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if len(got) != 2 {
		t.Fatalf("%d events, want 2", len(got))
	}
	if p := got[0]; p.Held == nil || p.IsHeld() || !p.IsLost() || p.Token != "a@1.2" || p.At == 0 {
		t.Errorf("pong: %+v", p)
	}
	if l := got[1]; l.At != 42 || l.Error != "gone" || l.Held != nil {
		t.Errorf("lost: %+v", l)
	}
	if _, err := ParseEvent([]byte(`{"token":"x"}`)); err == nil {
		t.Error("a line without an event parsed")
	}
}

func TestCommandLine(t *testing.T) {
	for _, c := range []Command{{Cmd: "ping"}, {Cmd: "write", ID: 7, URL: "http://x/", Entry: "e f"}, {Cmd: "two words"}} {
		line, err := c.Line()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseCommand(line)
		if err != nil || got != c {
			t.Errorf("%+v: line %q parsed as %+v, %v", c, line, got, err)
		}
	}
	if line, _ := (Command{Cmd: "go"}).Line(); line != "go" {
		t.Errorf("bare command: %q", line)
	}
}
